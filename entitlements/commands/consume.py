"""`entitlements consume` (run the KCL consumer) and `entitlements replay-parked`."""

from __future__ import annotations

__all__ = ["app"]

import json
import signal
import socket
import threading
import uuid
from types import FrameType

import typer

from config import load_settings
from entitlements._clients import aws_client
from entitlements._logging import configure_logging
from entitlements.child import build_registry
from pipeline.daemon import DaemonSpec, KclDaemon, supervise
from pipeline.decode import decode_record
from pipeline.parking import ParkedWork
from pipeline.quarantine import Quarantine

app = typer.Typer()


@app.command()
def consume(
    worker_id: str = typer.Option(None, help="Lease owner name; default host name plus a random suffix."),
    stream_arn: str = typer.Option(None, help="Stream to read; default the table's latest stream."),
) -> None:
    """Run the KCL consumer of the table's stream until SIGTERM or Ctrl-C (then checkpoint and stop)."""
    configure_logging()
    settings = load_settings()
    arn = stream_arn or settings.consumer.stream_arn
    if arn is None:
        table = aws_client(settings.aws, "dynamodb").describe_table(TableName=settings.consumer.table_name)
        arn = table["Table"].get("LatestStreamArn")
        if arn is None:
            raise typer.BadParameter("the table has no stream; run `entitlements table create`")
    worker = worker_id or settings.consumer.worker_id or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
    spec = DaemonSpec.from_settings(
        settings, stream_arn=arn, worker_id=worker, work_dir=settings.consumer.state_dir / "daemon"
    )
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    supervise(KclDaemon(spec), stop)


@app.command("replay-parked")
def replay_parked() -> None:
    """Hand parked batches back to the handler that could not flush them; remove each one that succeeds."""
    configure_logging()
    settings = load_settings()
    handlers = {handler.name: handler for handler in build_registry(settings)}
    parked = ParkedWork(settings.consumer.parked_dir)
    replayed = failed = 0
    for batch in parked:
        handler = handlers.get(batch.handler)
        if handler is None:
            failed += 1
            continue
        try:
            for record in batch.records:
                handler.add(
                    decode_record(
                        record.data,
                        stream_arn=batch.stream_arn,
                        shard_id=batch.shard_id,
                        sequence_number=record.sequence_number,
                    )
                )
            handler.flush()
        except Exception:
            handler.discard_pending()
            failed += 1
            continue
        parked.remove(batch)
        replayed += 1
    typer.echo(f"replayed {replayed} parked batches; {failed} still parked")
    if failed:
        raise typer.Exit(1)


@app.command("consumer-status")
def consumer_status() -> None:
    """Per shard: records seen, events by kind, quarantined, parked batches and lag (iterator age)."""
    settings = load_settings()
    stats_dir = settings.consumer.state_dir / "stats"
    files = sorted(stats_dir.glob("*.json")) if stats_dir.exists() else []
    if not files:
        typer.echo("no shard has reported yet")
        raise typer.Exit(1)
    for path in files:
        stats = json.loads(path.read_text())
        age = stats.get("iterator_age_ms")
        typer.echo(
            f"{stats['shard_id']}: {stats['records']} records, {stats['quarantined']} quarantined, "
            f"{stats['parked_batches']} parked batches, {stats['checkpoints']} checkpoints, "
            f"iterator age {'unknown' if age is None else f'{age / 1000:.1f}s'} (as of {stats['updated_at']})"
        )
        for kind, count in sorted(stats["events_by_type"].items()):
            typer.echo(f"    {kind}: {count}")
    typer.echo(f"quarantine: {Quarantine(settings.consumer.quarantine_dir).count()} records")

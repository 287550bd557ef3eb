"""`entitlements consume` (run the KCL consumer), `entitlements replay-parked` and
`entitlements consumer-status`."""

from __future__ import annotations

__all__ = ["app"]

import json
import signal
import socket
import threading
from types import FrameType

import typer

from config import load_settings
from entitlements._clients import aws_client
from entitlements._logging import configure_logging
from entitlements.commands._stores import (
    Stores,
    build_recovery,
    exit_if_damaged,
    one_line_errors,
    print_report,
)
from pipeline.daemon import DaemonSpec, KclDaemon, stable_worker_id, supervise

app = typer.Typer()


@app.command()
def consume(
    worker_id: str = typer.Option(
        None, help="Lease owner name; default the host name and a digest of the state folder (stable)."
    ),
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
    # Stable across restarts: a restarted worker takes its own lease back at once (its lease names it).
    worker = (
        worker_id
        or settings.consumer.worker_id
        or stable_worker_id(socket.gethostname(), settings.consumer.state_dir)
    )
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
    """Run parked batches again through the consumer's path, each to the handler that could not finish
    it, flushing the sinks it feeds (the lake) before the batch is removed. A record that cannot be
    decoded is quarantined, one now refused is dead-lettered, the rest replay; a damaged parked file is
    skipped, named on one line. Exits 1 while anything stays parked."""
    configure_logging()
    settings = load_settings()
    with one_line_errors("replay-parked"):
        report = build_recovery(settings).replay_parked()
        parked = Stores.from_settings(settings).parked
        still = parked.count()
    print_report("replayed parked batches:", report, "still parked")
    exit_if_damaged("replay-parked", parked)
    if still:
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
            f"{stats.get('dead_lettered', 0)} dead-lettered, "
            f"{stats['parked_batches']} parked batches, {stats['checkpoints']} checkpoints, "
            f"iterator age {'unknown' if age is None else f'{age / 1000:.1f}s'} (as of {stats['updated_at']})"
        )
        for kind, count in sorted(stats["events_by_type"].items()):
            typer.echo(f"    {kind}: {count}")
    stores = Stores.from_settings(settings)
    typer.echo(f"quarantine: {stores.quarantine.count()} records")
    typer.echo(f"dead letters: {stores.dead_letters.count()} records")
    typer.echo(f"parked: {stores.parked.count()} batches")

"""`entitlements consume` (run the KCL consumer), `entitlements replay-parked` and
`entitlements consumer-status`."""

from __future__ import annotations

__all__ = ["app"]

import dataclasses
import json
import signal
import socket
import threading
from types import FrameType
from typing import TYPE_CHECKING

import typer

from entitlements._logging import configure_logging
from entitlements._progress import progress
from entitlements.commands.cleanup import settings_naming_retry_queue

if TYPE_CHECKING:  # the daemon and the stores are imported when a command runs: --help stays fast
    from config import Settings
    from pipeline import DaemonSpec

app = typer.Typer()


@app.command()
def consume(
    worker_id: str = typer.Option(
        None, help="Lease owner name; default the host name and a digest of the state folder (stable)."
    ),
    stream_arn: str = typer.Option(None, help="Stream to read; default the table's latest stream."),
) -> None:
    """Run the KCL consumer of the table's stream until SIGTERM or Ctrl-C (then checkpoint and stop)."""
    from config import load_settings  # noqa: PLC0415 (kept off --help)
    from entitlements import compose  # noqa: PLC0415 (kept off `--help`)
    from entitlements._clients import bounded_calls  # noqa: PLC0415
    from pipeline import DaemonSpec, stable_worker_id  # noqa: PLC0415

    configure_logging()
    settings = load_settings()
    compose.launcher(settings)  # the JVM and the jar, checked before any lease is taken
    if settings.source.kind == "kinesis":
        # The Kinesis stream is the position: a table streaming only to Kinesis may have no DynamoDB
        # stream to look up.
        arn = stream_arn or settings.source.stream_arn or ""
    else:
        with bounded_calls():  # the table looked up: a silent endpoint is one line within seconds
            arn = stream_arn or settings.consumer.stream_arn or compose.table_stream_arn(settings)
    # Stable across restarts: a restarted worker takes its own lease back at once (its lease names it).
    worker = (
        worker_id
        or settings.consumer.worker_id
        or stable_worker_id(socket.gethostname(), settings.consumer.state_dir)
    )
    spec = DaemonSpec.from_settings(
        settings, stream_arn=arn, worker_id=worker, work_dir=settings.consumer.state_dir / "daemon"
    )
    # The children's log lines join this command's own on stderr; KCL's stay in their file.
    spec = dataclasses.replace(spec, children_log_path=None)
    stop = threading.Event()
    stopped_by: list[str] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopped_by.append(signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    code = _supervise_with_metrics(settings, spec, worker, stop)
    typer.echo(stopped_line(stopped_by[0] if stopped_by else None, code), err=True)


def stopped_line(signal_name: str | None, code: int | None) -> str:
    """What `consume` says as it ends, so that a stop is never read as a crash (or a crash as a stop)."""
    why = f"on {signal_name}" if signal_name else "on request"
    if code is None or code == 0:
        return f"consume: stopped {why}; the KCL daemon checkpointed what it had flushed and exited"
    if code < 0:
        return (
            f"consume: stopped {why}; the KCL daemon did not exit in time and was killed "
            f"({signal.Signals(-code).name}): records after its last checkpoint are delivered again"
        )
    return f"consume: stopped {why}; the KCL daemon exited with status {code}"


class _CountedDaemon:
    """The daemon, with its starts counted (the endpoint's `entitlements_consumer_daemon_starts`)."""

    def __init__(self, spec: DaemonSpec) -> None:
        from pipeline import KclDaemon  # noqa: PLC0415

        self._daemon = KclDaemon(spec)
        self.starts = 0
        self.stopped_with: int | None = None  # the last stop's exit status

    @property
    def running(self) -> bool:
        return self._daemon.running

    def start(self) -> None:
        self.starts += 1
        self._daemon.start()

    def wait(self, timeout: float | None = None) -> int:
        return self._daemon.wait(timeout)

    def stop(self, timeout: float = 60.0) -> int | None:
        self.stopped_with = self._daemon.stop(timeout)
        return self.stopped_with

    def delivered(self) -> bool:
        return self._daemon.delivered()


def _supervise_with_metrics(
    settings: Settings, spec: DaemonSpec, worker: str, stop: threading.Event
) -> int | None:
    """Supervise the daemon while holding the state folder (`consumer-status` sees it running), serving
    the children's figures on `metrics.consume_port` when set (their multiprocess folder is
    `<state>/metrics`). Returns the daemon's exit status when it was stopped."""
    import telemetry  # noqa: PLC0415 (kept off --help)

    metrics, state_dir = settings.metrics, settings.consumer.state_dir
    port = metrics.consume_port
    presence = telemetry.ConsumerPresence(state_dir)
    presence.claim(
        worker_id=worker, metrics_url=None if port is None else f"http://{metrics.host}:{port}/metrics"
    )
    endpoint = None
    try:
        if port is None:
            daemon = _CountedDaemon(spec)
        else:
            holder: list[_CountedDaemon] = []
            figures = telemetry.ChildrenFigures(
                state_dir / "metrics",
                running=lambda: bool(holder) and holder[0].running,
                starts=lambda: holder[0].starts if holder else 0,
            )
            environment = {**spec.environment, **figures.environment()}
            daemon = _CountedDaemon(dataclasses.replace(spec, environment=environment))
            holder.append(daemon)
            endpoint = telemetry.serve(
                metrics, port, variable="ENTITLEMENTS_METRICS__CONSUME_PORT", registry=figures.registry()
            )
        from entitlements import compose  # noqa: PLC0415
        from pipeline import (  # noqa: PLC0415
            launcher_application_name,
            supervise,
            watch_leases,
        )

        # The stuck-lease figure (entitlements_consumer_stuck_leases), read beside the daemon's work.
        failover = settings.consumer.failover_time_ms / 1000
        threading.Thread(
            target=watch_leases,
            # The lease table the launcher runs as (the Kinesis source's has its own name).
            args=(compose.lease_table_client(settings), launcher_application_name(settings)),
            kwargs={"failover_seconds": failover, "stop": stop},
            name="lease-watch",
            daemon=True,
        ).start()
        # The lake's checkpoints, compaction and clean-up: one runner per lake among every consume.
        maintenance = compose.lake_maintenance(settings, owner=worker, stop=stop)
        # Never wait longer between starts than a lease outlives its holder (pipeline.daemon.supervise).
        supervise(daemon, stop, max_backoff=failover)
        if maintenance is not None:
            maintenance.join(5.0)  # its lease given up for the next runner, unless a compaction runs
        return daemon.stopped_with
    finally:
        if endpoint is not None:
            endpoint.close()
        presence.release()


@app.command("replay-parked")
def replay_parked() -> None:
    """Run parked batches again through the consumer's path, each to the handler that could not finish
    it, flushing the sinks it feeds (the lake) before the batch is removed. A record that cannot be
    decoded is quarantined, one now refused is dead-lettered, the rest replay; a damaged parked file is
    skipped, named on one line. Exits 1 while anything stays parked. With nothing parked it ends at once,
    needing no AWS."""
    from config import load_settings  # noqa: PLC0415 (kept off --help)
    from entitlements.commands._stores import (  # noqa: PLC0415
        Stores,
        build_recovery,
        exit_if_damaged,
        one_line_errors,
        print_report,
    )

    configure_logging()
    settings = load_settings()
    parked = Stores.from_settings(settings).parked
    if parked.count() == len(parked.damaged()):  # nothing that can replay: no handler is built
        typer.echo("nothing parked" if parked.count() == 0 else "nothing parked that can be read")
        exit_if_damaged("replay-parked", parked)
        return
    with one_line_errors("replay-parked"), progress("replaying parked batches") as bar:
        report = build_recovery(settings).replay_parked(progress=bar.at)
        still = parked.count()
    print_report("replayed parked batches:", report, "still parked")
    exit_if_damaged("replay-parked", parked)
    if still:
        raise typer.Exit(1)


@app.command("consumer-status")
def consumer_status(
    as_json: bool = typer.Option(
        False, "--json", help="One JSON object: each figure with its value, as_of and age_seconds."
    ),
    retry_queue_name: str | None = typer.Option(
        None,
        help="The cleanup retry queue whose depth is shown. Default: the setting, "
        "ENTITLEMENTS_CLEANUP__RETRY_QUEUE_NAME.",
    ),
) -> None:
    """Whether the consumer runs; per shard: records, events by kind, quarantined, dead-lettered, parked
    batches, checkpoints and lag (iterator age), each with its age; the stores; the cleanup retry queue.
    Exits 1 while no shard has reported, or while a shard's stats file cannot be read."""
    from entitlements.commands._consumer_status import status_lines, status_report  # noqa: PLC0415

    report = status_report(settings_naming_retry_queue(retry_queue_name))
    if as_json:
        typer.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        for line in status_lines(report):
            typer.echo(line)
    if not report["shards"] or any("error" in shard for shard in report["shards"]):
        raise typer.Exit(1)

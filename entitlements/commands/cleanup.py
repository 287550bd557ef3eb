"""`entitlements cleanup ...`: the Array account cleanup's operator commands (docs/operations/cleanup.md).

- `setup` creates the retry queue and its dead-letter queue;
- `retry-worker` drains parked cleanups (until stopped, or `--drain` until the queue is empty);
- `repair [--dry-run]` marks Removed every row whose account the lake shows deleted while the row is not.

The stream handler, the retry worker and their clients are built by `entitlements.compose`; `setup` is
the one place the retry queues are made (the KCL child only looks them up).
"""

from __future__ import annotations

__all__ = ["app"]

import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from entitlements._logging import configure_logging
from entitlements._progress import progress

if TYPE_CHECKING:  # imported when a command runs: --help stays fast
    from config import Settings

# The processors and the lake are imported by each command as it runs, so that `--help` stays fast.
app = typer.Typer(no_args_is_help=True, add_completion=False)

QueueOption = Annotated[
    str | None,
    typer.Option(
        "--queue-name",
        help="The retry queue (its DLQ: <name>-dlq). "
        "Default: the setting, ENTITLEMENTS_CLEANUP__RETRY_QUEUE_NAME.",
    ),
]


def settings_naming_retry_queue(queue_name: str | None) -> Settings:
    """The settings, with the retry queue a command's option names in place of the setting's: the
    child, the retry worker and the commands then all read the queue from one place."""
    from config import load_settings  # noqa: PLC0415 (kept off --help)

    return load_settings(**({} if queue_name is None else {"cleanup": {"retry_queue_name": queue_name}}))


@app.callback()
def cleanup() -> None:
    """Array account cleanup: the retry queue, its worker, and the repair of unmarked rows."""


@app.command()
def setup(queue_name: QueueOption = None) -> None:
    """Create (or bring up to date) the retry queue and its dead-letter queue; print their URLs."""
    from entitlements import compose  # noqa: PLC0415 (kept off --help)
    from entitlements._clients import bounded_calls  # noqa: PLC0415

    configure_logging()
    with bounded_calls():  # a silent endpoint: one line within seconds, not minutes of retries
        queues = compose.setup_retry_queues(settings_naming_retry_queue(queue_name))
    typer.echo(f"retry queue: {queues.queue_url}")
    typer.echo(f"dead-letter queue: {queues.dlq_url}")


@app.command("retry-worker")
def retry_worker(
    drain: Annotated[
        bool, typer.Option("--drain", help="Stop when the queue is empty instead of running until stopped.")
    ] = False,
    max_seconds: Annotated[float, typer.Option(help="With --drain: give up after this long.")] = 600.0,
    queue_name: QueueOption = None,
) -> None:
    """Drain parked cleanups: guard, delete at Array, mark the row; outcomes land in the lake."""
    from entitlements import compose  # noqa: PLC0415 (kept off --help)

    configure_logging()
    settings = settings_naming_retry_queue(queue_name)
    if drain:
        report = compose.drain_retry_queue(settings, max_seconds=max_seconds, name="cleanup-retry")
        typer.echo(
            f"passes {report.passes}, received {report.received}, finished {report.finished}, "
            f"re-parked {report.reparked}, unreadable {report.malformed}, "
            f"queue {'empty' if report.empty else 'not empty'}"
        )
        raise typer.Exit(0 if report.empty else 1)
    lake = compose.lake_handler(settings, name="cleanup-retry")
    worker = compose.retry_worker(settings, lake)
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    import telemetry  # noqa: PLC0415 (kept off --help)

    metrics = settings.metrics
    port, variable = metrics.retry_worker_port, "ENTITLEMENTS_METRICS__RETRY_WORKER_PORT"
    with telemetry.running_metrics(metrics, process="retry-worker", port=port, variable=variable):
        worker.run_forever(stop)
    lake.flush()


@app.command()
def repair(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the rows; change nothing.")] = False,
) -> None:
    """Mark Removed, conditionally, every row whose account the lake shows deleted by cleanup while the
    row is not Removed (the service design's admitted gap: the best-effort mark failed). Run by hand.

    Exits 0 when every listed row was marked (or, with --dry-run, listed), 1 when some could not be."""
    from analytics import LakeDeletedAccounts, lake_from_settings  # noqa: PLC0415
    from config import load_settings  # noqa: PLC0415 (kept off --help)
    from entitlements import compose  # noqa: PLC0415
    from entitlements._clients import aws_client, bounded_calls  # noqa: PLC0415
    from processors.cleanup import repair_removed_rows  # noqa: PLC0415
    from schema.clock import clock_from_settings  # noqa: PLC0415

    configure_logging()
    settings = load_settings()
    # The table, reached once first: an unreachable or missing table is one line, not one per account,
    # and a silent endpoint one line within seconds (the repair's own calls keep the settings' retries).
    with bounded_calls():
        compose.table_stream_arn(settings)
    with progress("repairing: reading each deleted account's rows") as bar:
        report = repair_removed_rows(
            aws_client(settings.aws, "dynamodb", **compose.AWS_TIMEOUTS),
            settings.consumer.table_name,
            LakeDeletedAccounts(lake_from_settings(settings, create=False)),
            clock=clock_from_settings(settings.clock),
            dry_run=dry_run,
            progress=bar.at,
        )
    if report.accounts and not report.accounts_with_rows and not report.unreadable:
        # Every row repair marks stays in the table (Removed or not): a table holding none of the rows
        # of the accounts the lake deleted is another table than the lake's, not "0 to mark".
        typer.echo(
            f"cleanup repair: the table {settings.consumer.table_name} holds none of the rows of the "
            f"{report.accounts} deleted account(s) in the lake at {settings.lake.root}: likely the wrong "
            "table or lake; set ENTITLEMENTS_CONSUMER__TABLE_NAME and ENTITLEMENTS_LAKE__ROOT to the pair "
            "the consumer wrote",
            err=True,
        )
        raise typer.Exit(2)
    failed = {(c.pk, c.sk): code for c, code in report.failed}
    removed_meanwhile = {(c.pk, c.sk) for c in report.already_removed}
    for candidate in report.candidates:
        if dry_run:
            verdict = "would mark Removed"
        elif (candidate.pk, candidate.sk) in removed_meanwhile:
            verdict = "already Removed (marked meanwhile)"
        elif (candidate.pk, candidate.sk) in failed:
            verdict = f"NOT marked ({failed[(candidate.pk, candidate.sk)]})"
        else:
            verdict = "marked Removed"
        typer.echo(f"{candidate.pk} {candidate.sk} status={candidate.status}: {verdict}")
    for account, code in sorted(report.unreadable.items()):
        typer.echo(f"ARRAY#{account}: rows unreadable ({code})")
    action = "to mark" if dry_run else "marked"
    typer.echo(
        f"{report.accounts} deleted account(s) in the lake, {len(report.candidates)} row(s) not Removed, "
        f"{len(report.candidates) if dry_run else report.marked} {action}, "
        f"{len(report.already_removed)} already Removed, {len(report.failed)} failed, "
        f"{len(report.unreadable)} unreadable"
    )
    raise typer.Exit(1 if report.failed or report.unreadable else 0)

"""`entitlements cleanup ...`: the Array account cleanup's operator commands (docs/operations/cleanup.md).

- `setup` creates the retry queue and its dead-letter queue;
- `retry-worker` drains parked cleanups (until stopped, or `--drain` until the queue is empty);
- `repair [--dry-run]` marks Removed every row whose account the lake shows deleted while the row is not.

`build_cleanup_handler` builds the stream handler for the KCL child (register it before the lake).
"""

from __future__ import annotations

__all__ = ["LakeDeletedAccounts", "app", "build_cleanup_handler", "build_retry_worker"]

import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Annotated, Any, NamedTuple

import typer

from analytics import LakeHandler, lake_from_settings
from analytics.lake import Lake
from analytics.views import connect
from config import Settings, load_settings
from entitlements._clients import aws_client
from entitlements._logging import configure_logging
from pipeline.clock import clock_from_settings
from pipeline.filtering import DroppingUsers
from processors.cleanup import (
    DEFAULT_RETRY_QUEUE_NAME,
    CleanupHandler,
    HttpArrayClient,
    RetryQueues,
    ensure_retry_queues,
    repair_removed_rows,
)
from processors.cleanup.retry_worker import RetryWorker
from processors.erasure import ErasureLedger, erased_filter
from schema.outcomes import OutcomeKind, OutcomeSink

app = typer.Typer(no_args_is_help=True, add_completion=False)

# Every AWS call the cleanup makes returns within these, so the handler's time budget holds.
_AWS_TIMEOUTS = {"connect_timeout": 2, "read_timeout": 5}

QueueOption = Annotated[str, typer.Option("--queue-name", help="The retry queue (its DLQ: <name>-dlq).")]


@app.callback()
def cleanup() -> None:
    """Array account cleanup: the retry queue, its worker, and the repair of unmarked rows."""


def _queues(settings: Settings, queue_name: str) -> RetryQueues:
    sqs = aws_client(settings.aws, "sqs", **_AWS_TIMEOUTS)
    visibility = int(settings.array.retry_budget_seconds * 3) + 30
    return ensure_retry_queues(sqs, queue_name, visibility_timeout_seconds=visibility)


class _Clients(NamedTuple):
    """What the stream handler and the retry worker both call: the table, the retry queue, Array."""

    dynamodb: Any
    sqs: Any
    array: HttpArrayClient
    queue_url: str


def _clients(settings: Settings, queue_name: str) -> _Clients:
    """The clients built from the settings, the retry queues ensured."""
    queues = _queues(settings, queue_name)
    return _Clients(
        dynamodb=aws_client(settings.aws, "dynamodb", **_AWS_TIMEOUTS),
        sqs=aws_client(settings.aws, "sqs", **_AWS_TIMEOUTS),
        array=HttpArrayClient(settings.array),
        queue_url=queues.queue_url,
    )


def build_cleanup_handler(
    settings: Settings, sink: OutcomeSink, *, queue_name: str = DEFAULT_RETRY_QUEUE_NAME
) -> CleanupHandler:
    """The cleanup stream handler, its clients built from the settings. Ensures the retry queues."""
    clients = _clients(settings, queue_name)
    return CleanupHandler(
        dynamodb=clients.dynamodb,
        sqs=clients.sqs,
        array=clients.array,
        table_name=settings.consumer.table_name,
        retry_queue_url=clients.queue_url,
        sink=sink,
        clock=clock_from_settings(settings.clock),
        concurrency=settings.array.concurrency,
        retry_budget_seconds=settings.array.retry_budget_seconds,
    )


def build_retry_worker(
    settings: Settings, lake: LakeHandler, *, queue_name: str = DEFAULT_RETRY_QUEUE_NAME
) -> RetryWorker:
    """The retry worker, landing its outcomes in the lake (flushed before a message is acknowledged).
    Outcomes of erased accounts (a cleanup parked before the erasure) are dropped, as at the consumer."""
    clients = _clients(settings, queue_name)
    return RetryWorker(
        sqs=clients.sqs,
        dynamodb=clients.dynamodb,
        array=clients.array,
        table_name=settings.consumer.table_name,
        queue_url=clients.queue_url,
        sink=DroppingUsers(lake, erased_filter(ErasureLedger.from_settings(settings))),
        clock=clock_from_settings(settings.clock),
        flush_outcomes=lake.flush,
        concurrency=settings.array.concurrency,
        retry_budget_seconds=settings.array.retry_budget_seconds,
    )


class LakeDeletedAccounts:
    """`DeletedAccountsSource` over the lake's `outcomes` view (deduplicated): every account cleanup
    recorded as deleted or already deleted."""

    _KINDS = (OutcomeKind.CLEANUP_DELETED.value, OutcomeKind.CLEANUP_ALREADY_DELETED.value)

    def __init__(self, lake: Lake) -> None:
        self._lake = lake

    def deleted_accounts(self) -> Iterator[tuple[str | None, str]]:
        con = connect(self._lake)
        try:
            rows: list[tuple[Any, Any]] = con.execute(
                "SELECT DISTINCT user_id, array_account_id FROM outcomes "
                "WHERE kind IN (?, ?) AND array_account_id IS NOT NULL ORDER BY array_account_id",
                list(self._KINDS),
            ).fetchall()
        finally:
            con.close()
        for user_id, account in rows:
            yield (None if user_id is None else str(user_id)), str(account)


@app.command()
def setup(queue_name: QueueOption = DEFAULT_RETRY_QUEUE_NAME) -> None:
    """Create (or bring up to date) the retry queue and its dead-letter queue; print their URLs."""
    configure_logging()
    queues = _queues(load_settings(), queue_name)
    typer.echo(f"retry queue: {queues.queue_url}")
    typer.echo(f"dead-letter queue: {queues.dlq_url}")


@app.command("retry-worker")
def retry_worker(
    drain: Annotated[
        bool, typer.Option("--drain", help="Stop when the queue is empty instead of running until stopped.")
    ] = False,
    max_seconds: Annotated[float, typer.Option(help="With --drain: give up after this long.")] = 600.0,
    queue_name: QueueOption = DEFAULT_RETRY_QUEUE_NAME,
) -> None:
    """Drain parked cleanups: guard, delete at Array, mark the row; outcomes land in the lake."""
    configure_logging()
    settings = load_settings()
    lake = LakeHandler(lake_from_settings(settings), settings.lake, name="cleanup-retry")
    worker = build_retry_worker(settings, lake, queue_name=queue_name)
    if drain:
        report = worker.drain(max_seconds=max_seconds)
        lake.flush()
        typer.echo(
            f"passes {report.passes}, received {report.received}, finished {report.finished}, "
            f"re-parked {report.reparked}, unreadable {report.malformed}, "
            f"queue {'empty' if report.empty else 'not empty'}"
        )
        raise typer.Exit(0 if report.empty else 1)
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    worker.run_forever(stop)
    lake.flush()


@app.command()
def repair(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the rows; change nothing.")] = False,
) -> None:
    """Mark Removed, conditionally, every row whose account the lake shows deleted by cleanup while the
    row is not Removed (the seed's admitted gap: the best-effort mark failed). Run by hand.

    Exits 0 when every listed row was marked (or, with --dry-run, listed), 1 when some could not be."""
    configure_logging()
    settings = load_settings()
    report = repair_removed_rows(
        aws_client(settings.aws, "dynamodb", **_AWS_TIMEOUTS),
        settings.consumer.table_name,
        LakeDeletedAccounts(lake_from_settings(settings)),
        clock=clock_from_settings(settings.clock),
        dry_run=dry_run,
    )
    failed = {(c.pk, c.sk): code for c, code in report.failed}
    for candidate in report.candidates:
        if dry_run:
            verdict = "would mark Removed"
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
        f"{len(report.candidates) if dry_run else report.marked} {action}, {len(report.failed)} failed, "
        f"{len(report.unreadable)} unreadable"
    )
    raise typer.Exit(1 if report.failed or report.unreadable else 0)

"""`entitlements relinker ...`: the relinker worker (the service design's relinker, through arraylink).

- `setup` creates the job queue and its dead-letter queue (the worker never does);
- `enqueue --user U [--user V ...] | --all-active` sends one relink job per user;
- `run` takes jobs until stopped (`--drain`: until the queue is empty, exiting 1 when a job failed or
  was unreadable), `service.relinker_concurrency` at a time; each result is an outcome event in the lake
  (linked, not_active, failed).

`enqueue --user` refuses (exit 2, nothing sent) an id the service's routes refuse (`service.ids`).
"""

from __future__ import annotations

__all__ = ["app"]

import signal
import threading
from types import FrameType
from typing import Annotated

import typer

from entitlements._logging import configure_logging

# The service's parts are imported by each command as it runs, so that `--help` stays fast.

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.callback()
def relinker() -> None:
    """The relinker worker: its queues, its jobs, its run."""


@app.command()
def setup() -> None:
    """Create (or bring up to date) the relink job queue and its dead-letter queue; print their URLs."""
    from config import load_settings  # noqa: PLC0415 (kept off --help)
    from entitlements import compose  # noqa: PLC0415
    from entitlements._clients import bounded_calls  # noqa: PLC0415

    configure_logging()
    settings = load_settings()
    with bounded_calls():  # a silent endpoint: one line within seconds, not minutes of retries
        queues = compose.setup_relink_queues(settings)
    typer.echo(f"relink queue: {queues.queue_url}")
    typer.echo(f"dead-letter queue: {queues.dlq_url}")


@app.command()
def enqueue(
    user: Annotated[list[str] | None, typer.Option("--user", help="A user to relink (repeatable).")] = None,
    all_active: Annotated[
        bool, typer.Option("--all-active", help="Every user holding an Active row.")
    ] = False,
) -> None:
    """Send one relink job per chosen user (or per user holding an Active row)."""
    from config import load_settings  # noqa: PLC0415 (kept off --help)
    from entitlements import compose  # noqa: PLC0415
    from entitlements._clients import aws_client, bounded_calls  # noqa: PLC0415
    from service import USER_ID_RULE, EntitlementTable, enqueue_relinks, is_user_id  # noqa: PLC0415

    configure_logging()
    if bool(user) == all_active:
        typer.echo("entitlements: give --user (one or more) or --all-active", err=True)
        raise typer.Exit(2)
    refused = sum(1 for one in user or [] if not is_user_id(one))
    if refused:  # the service would refuse each: a job for one could never link (nothing is sent)
        typer.echo(
            f"entitlements: {refused} --user value(s) not a user id ({USER_ID_RULE}); nothing sent", err=True
        )
        raise typer.Exit(2)
    settings = load_settings()
    with bounded_calls():  # sends and a table scan, no long poll: a silent endpoint is one line
        sqs, url = compose.relink_queue(settings)
        if all_active:
            dynamodb = aws_client(settings.aws, "dynamodb", **compose.AWS_TIMEOUTS)
            users = EntitlementTable(dynamodb, settings.consumer.table_name).active_user_ids()
            sent = enqueue_relinks(sqs, url, users)
        else:
            sent = enqueue_relinks(sqs, url, user or [])
    typer.echo(f"enqueued {sent} relink job(s)")


@app.command()
def run(
    drain: Annotated[
        bool, typer.Option("--drain", help="Stop when the queue is empty instead of running until stopped.")
    ] = False,
    max_seconds: Annotated[float, typer.Option(help="With --drain: give up after this long.")] = 600.0,
) -> None:
    """Run relink jobs: arraylink for each, its outcome in the lake, then the job acknowledged."""
    from config import load_settings  # noqa: PLC0415 (kept off --help)
    from entitlements import compose  # noqa: PLC0415

    configure_logging()
    settings = load_settings()
    parts = compose.service_parts(settings, sink=compose.lake_handler(settings, name="relinker-outcomes"))
    worker = compose.relinker(settings, parts=parts)
    try:
        if drain:
            report = worker.drain(max_seconds=max_seconds)
        else:
            stop = threading.Event()

            def request_stop(signum: int, frame: FrameType | None) -> None:
                stop.set()

            signal.signal(signal.SIGTERM, request_stop)
            signal.signal(signal.SIGINT, request_stop)
            import telemetry  # noqa: PLC0415 (kept off --help)

            metrics = settings.metrics
            port, variable = metrics.relinker_port, "ENTITLEMENTS_METRICS__RELINKER_PORT"
            with telemetry.running_metrics(metrics, process="relinker", port=port, variable=variable):
                report = worker.run_forever(stop)
    finally:
        parts.recorder.flush()
        if parts.close is not None:
            parts.close()
    typer.echo(
        f"received {report.received}, linked {report.linked}, not_active {report.not_active}, "
        f"failed {report.failed}, left for redelivery {report.redelivered}, unreadable {report.unreadable}"
    )
    if drain and (report.failed or report.unreadable):  # a drain that left work undone says so
        typer.echo("entitlements: relink jobs failed or were unreadable (see the counts above)", err=True)
        raise typer.Exit(1)

"""`entitlements erasure ...`: the erasure contract from the command line, and this store's subscriber
(`setup` makes its side of the channel, the one place its queues are made; `worker` runs the worker
`entitlements.compose` builds; docs/operations/erasure.md)."""

from __future__ import annotations

__all__ = ["app", "erasure_settings"]

import os
import signal
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Annotated

import typer

from config import ErasureSettings, Settings, load_settings
from entitlements._logging import configure_logging
from schema.erasure import (
    REQUEST_TYPES,
    ErasureContractError,
    ErasureEnvironmentError,
    ErasureHandlerEnvironment,
    parse_erasure_message,
    refusal_reasons,
)

# The worker's parts (processors.erasure, the composition root) are imported by the commands that run
# them, so that `--help` and `validate` stay fast.
app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.callback()
def erasure() -> None:
    """The erasure contract between the account service and the stores."""


def _verdict(body: bytes) -> str:
    """`accepted <type>`, `NOT_A_REQUEST <type>`, `NOT_JSON` or `INVALID_MESSAGE <reasons>` (each refusal's
    JSON path and rule): never the body."""
    try:
        message = parse_erasure_message(body)
    except ErasureContractError as error:
        if error.code != "INVALID_MESSAGE":
            return error.code.value
        reasons = "; ".join(str(reason) for reason in refusal_reasons(body))
        return f"{error.code.value} {reasons}" if reasons else error.code.value
    verdict = "accepted" if message.type in REQUEST_TYPES else "NOT_A_REQUEST"
    return f"{verdict} {message.type}"


@app.command()
def validate(
    file: Annotated[
        typer.FileBinaryRead, typer.Argument(metavar="FILE|-", help="One JSON message per line; - for stdin.")
    ],
) -> None:
    """Check messages (one JSON message per line) as a store's parser would, never printing them.

    Prints each line's number and verdict: accepted, NOT_JSON, INVALID_MESSAGE or NOT_A_REQUEST, with
    the type of a valid message; an invalid one's reasons are the JSON path and the schema rule of each
    refusal (`$.sendNo: minimum 1`), never a value. Empty lines are skipped. Exits 0 when every message
    is accepted, 1 otherwise.
    """
    checked = accepted = 0
    for number, line in enumerate(file, start=1):
        body = line.rstrip(b"\r\n")
        if not body:
            continue
        verdict = _verdict(body)
        checked += 1
        accepted += verdict.startswith("accepted ")
        typer.echo(f"{number}: {verdict}")
    typer.echo(f"{checked} messages, {accepted} accepted, {checked - accepted} refused")
    if accepted != checked:
        raise typer.Exit(code=1)


def erasure_settings(settings: Settings, environ: Mapping[str, str]) -> ErasureSettings:
    """The erasure settings, with the contract's own variables (ERASURE_PASS_TWO_DELAY_SECONDS,
    ERASURE_BATCH_TIMEOUT_SECONDS, read through `ErasureHandlerEnvironment`, each held to its cap)
    winning over ENTITLEMENTS_ERASURE__* when either is set."""
    names = (
        ErasureHandlerEnvironment.PASS_TWO_DELAY_VARIABLE,
        ErasureHandlerEnvironment.BATCH_TIMEOUT_VARIABLE,
    )
    if not any(name in environ for name in names):
        return settings.erasure
    contract = ErasureHandlerEnvironment.from_environment(environ)
    return settings.erasure.model_copy(
        update={
            "pass_two_delay_seconds": contract.pass_two_delay_seconds,
            "batch_timeout_seconds": float(contract.batch_timeout_seconds),
        }
    )


def _settings(command: str) -> tuple[Settings, ErasureSettings]:
    from processors.erasure import ErasureConfigError, checked_timings  # noqa: PLC0415

    settings = load_settings()
    try:
        erasure = erasure_settings(settings, os.environ)
        checked_timings(erasure)
        if erasure.pass_two_delay_seconds <= settings.consumer.commit_interval_seconds:
            # An event the consumer buffered just before the ledger entry lands up to one commit
            # interval later, after the first pass's purge: only a later second pass removes it.
            raise ErasureConfigError(
                f"pass_two_delay_seconds={erasure.pass_two_delay_seconds} must exceed the consumer's "
                f"commit_interval_seconds={settings.consumer.commit_interval_seconds:g}"
            )
    except (ErasureEnvironmentError, ErasureConfigError) as refused:
        typer.echo(f"entitlements: erasure {command}: refusing to start: {refused}", err=True)
        raise typer.Exit(code=2) from None
    return settings, erasure


@app.command()
def setup() -> None:
    """Create (or bring to the contract) the store's erasure queue, its dead-letter queue, the topic
    subscription (raw delivery, no filter policy) and the responses queue. Idempotent."""
    from entitlements import compose  # noqa: PLC0415
    from processors.erasure import ErasureConfigError, checked_timings  # noqa: PLC0415

    configure_logging()
    settings, erasure = _settings("setup")
    from entitlements._clients import bounded_calls  # noqa: PLC0415

    try:
        with bounded_calls():  # a silent endpoint: one line within seconds, not minutes of retries
            channel = compose.setup_erasure_channel(settings, erasure)
    except ErasureConfigError as refused:
        typer.echo(f"entitlements: erasure setup: refused: {refused}", err=True)
        raise typer.Exit(code=2) from None
    timings = checked_timings(erasure)
    typer.echo(f"topic: {channel.topic_arn}")
    typer.echo(f"queue: {channel.queue_url}")
    typer.echo(f"dead-letter queue: {channel.dlq_url}")
    typer.echo(f"responses queue: {channel.responses_queue_url}")
    typer.echo(
        f"visibility timeout {timings.visibility_timeout_seconds} s, "
        f"maxReceiveCount {timings.max_receive_count}, raw delivery, no filter policy"
    )


@app.command()
def worker(
    wait_seconds: Annotated[int, typer.Option(min=0, max=20, help="Long-poll wait per receive.")] = 20,
    pollers: Annotated[int, typer.Option(min=1, max=16, help="Receive loops running at once.")] = 2,
) -> None:
    """Run the store's erasure subscriber until SIGTERM or Ctrl-C. Refuses to start when a setting is
    above its channel cap or the queue is not set up as the contract requires."""
    from entitlements import compose  # noqa: PLC0415
    from processors.erasure import ErasureConfigError  # noqa: PLC0415

    configure_logging()
    settings, erasure = _settings("worker")
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    import telemetry  # noqa: PLC0415 (kept off --help)

    port, variable = settings.metrics.erasure_worker_port, "ENTITLEMENTS_METRICS__ERASURE_WORKER_PORT"
    with (
        telemetry.running_metrics(settings.metrics, process="erasure-worker", port=port, variable=variable),
        compose.erasure_worker(settings, erasure, wait_seconds=wait_seconds) as running,
    ):
        try:
            running.run(stop, wait_seconds=wait_seconds, pollers=pollers)
        except ErasureConfigError as refused:
            typer.echo(f"entitlements: erasure worker: refusing to start: {refused}", err=True)
            raise typer.Exit(code=2) from None

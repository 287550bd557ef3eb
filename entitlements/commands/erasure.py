"""`entitlements erasure ...`: the erasure contract from the command line, and this store's subscriber
(`setup` makes its side of the channel, the one place its queues are made; `worker` runs the worker
`entitlements.compose` builds; `try` publishes one request and prints its answer;
docs/operations/erasure.md)."""

from __future__ import annotations

__all__ = ["app", "erasure_settings"]

import enum
import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import timedelta
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from entitlements._logging import configure_logging

# The contract twin (jsonschema, its fixtures), the settings and the worker's parts (processors.erasure,
# the composition root) are imported by the commands that use them: `erasure --help` and each command's
# help load none of them, and `validate` loads the contract only.
if TYPE_CHECKING:
    from config import ErasureSettings, Settings
    from schema.erasure import ErasureRequest

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.callback()
def erasure() -> None:
    """The erasure contract between the account service and the stores."""


def _verdict(body: bytes) -> str:
    """`accepted <type>`, `NOT_A_REQUEST <type>`, `NOT_JSON` or `INVALID_MESSAGE <reasons>` (each refusal's
    JSON path and rule): never the body."""
    from schema.erasure import (  # noqa: PLC0415 (kept off --help)
        REQUEST_TYPES,
        ErasureContractError,
        parse_erasure_message,
        refusal_reasons,
    )

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
    from schema.erasure import ErasureHandlerEnvironment  # noqa: PLC0415 (kept off --help)

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
    from config import load_settings  # noqa: PLC0415 (kept off --help)
    from processors.erasure import ErasureConfigError, checked_timings  # noqa: PLC0415
    from schema.erasure import ErasureEnvironmentError  # noqa: PLC0415

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


class TryType(enum.StrEnum):
    ERASE = "ERASE"
    CHECK = "CHECK"
    CLASSIFY = "CLASSIFY"


class TryKeyKind(enum.StrEnum):
    ACCOUNT = "ACCOUNT"
    ADDRESS = "ADDRESS"


_LONG_POLL_SECONDS = 20  # SQS's most
_FOREIGN_HOLD_SECONDS = 5


def _put_back(sqs: Any, queue_url: str, receipts: Iterable[str]) -> None:
    """Others' answers visible again at once; best effort (a receipt gone stale needs nothing)."""
    import botocore.exceptions  # noqa: PLC0415

    for receipt in receipts:
        try:
            sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt, VisibilityTimeout=0)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
            continue  # it comes back by itself within _FOREIGN_HOLD_SECONDS


def _fail(line: str, code: int = 1) -> typer.Exit:
    typer.echo(f"entitlements: erasure try: {line}", err=True)
    return typer.Exit(code=code)


def _request_body(
    request_type: TryType, key_kind: TryKeyKind, key: str, expires_at: str, send_no: int
) -> bytes:
    """The request as the account service would publish it: a fresh requestId, expiresAt = now + R,
    sendNo only where the type has one (ERASE; CHECK and CLASSIFY have none)."""
    data: dict[str, Any] = {
        "type": f"erasure/{request_type.value}",
        "requestId": f"try-{uuid.uuid4()}",
        "expiresAt": expires_at,
        "keyKind": key_kind.value,
        "key": key,
    }
    if request_type is TryType.ERASE:
        data["sendNo"] = send_no
    return json.dumps(data, ensure_ascii=False).encode()


def _topic_arn(sns: Any, name: str) -> str | None:
    """The erasure topic's ARN, looked up (never created: on AWS the account service owns the topic)."""
    for page in sns.get_paginator("list_topics").paginate():
        for topic in page.get("Topics", []):
            arn = str(topic.get("TopicArn", ""))
            if arn.rsplit(":", 1)[-1] == name:
                return arn
    return None


def _answer_to(request_id: str, body: str) -> bool:
    from schema.erasure import ErasureContractError, parse_erasure_message  # noqa: PLC0415 (kept off --help)

    try:
        message = parse_erasure_message(body)
    except ErasureContractError:
        return False
    return getattr(message, "request_id", None) == request_id


@app.command("try")
def try_request(
    request_type: Annotated[TryType, typer.Argument(metavar="ERASE|CHECK|CLASSIFY", case_sensitive=False)],
    key_kind: Annotated[
        TryKeyKind, typer.Option("--key-kind", case_sensitive=False, help="ACCOUNT or ADDRESS.")
    ],
    key: Annotated[str, typer.Option("--key", help="The account id, or the address (no A to Z).")],
    wait: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=3600,
            help="Seconds to wait for the answer; default 30, and for ERASE the second pass's delay + 60.",
        ),
    ] = None,
    send_no: Annotated[int, typer.Option("--send-no", min=1, help="ERASE only: the request's sendNo.")] = 1,
) -> None:
    """Publish one valid request on the erasure topic, as the account service would, and print this
    store's answer (HOLDINGS for CHECK and CLASSIFY, ACK for ERASE) from the responses queue when it
    comes. For the local stack: `entitlements erasure setup` first, and `entitlements erasure worker`
    running. The answer's JSON goes to stdout (it echoes the key: it is for the person who asked); the
    progress lines go to stderr and name neither the key nor the requestId. Exits 0 with an answer, 1
    when none came within the wait, 2 on a request the contract refuses or a channel not set up.
    """
    from schema.clock import clock_from_settings  # noqa: PLC0415 (kept off --help)
    from schema.erasure import (  # noqa: PLC0415
        CHANNEL_CONSTANTS,
        ErasureContractError,
        parse_erasure_request,
        refusal_reasons,
    )

    configure_logging()
    settings, erasure = _settings("try")
    if send_no != 1 and request_type is not TryType.ERASE:
        raise _fail(f"--send-no: {request_type.value} has no sendNo (only ERASE does)", code=2)
    now = clock_from_settings(settings.clock).now()  # the worker's clock: expiresAt is read against it
    expires = (now + timedelta(seconds=CHANNEL_CONSTANTS.expiry_period_seconds)).strftime(
        "%Y-%m-%dT%H:%M:%S.%f"
    )[:-3] + "Z"
    body = _request_body(request_type, key_kind, key, expires, send_no)
    try:
        request = parse_erasure_request(body)  # the models and the JSON Schema, as a store parses it
    except ErasureContractError as refused:
        reasons = "; ".join(str(reason) for reason in refusal_reasons(body)) or refused.code.value
        raise _fail(f"the contract refuses this request: {reasons}", code=2) from None
    if wait is None:
        wait = erasure.pass_two_delay_seconds + 60 if request_type is TryType.ERASE else 30
    responses_url = _publish(settings, erasure, request)
    typer.echo(
        f"published {request.type} on {erasure.topic_name}; waiting up to {wait} s for the answer on "
        f"{erasure.responses_queue_name}",
        err=True,
    )
    answer = _await_answer(settings, responses_url, request.request_id, wait)
    if answer is not None:
        typer.echo(answer)
        return
    raise _fail(
        f"no answer within {wait} s on {erasure.responses_queue_name}: is entitlements erasure worker "
        "running on this stack? (the request stays valid until its expiresAt; --wait waits longer)"
    )


def _publish(settings: Settings, erasure: ErasureSettings, request: ErasureRequest) -> str:
    """Publish `request` on the erasure topic; the responses queue's URL. Both are looked up (never
    made: `entitlements erasure setup` makes them), under bounded calls: a silent endpoint is one line
    within seconds."""
    import botocore.exceptions  # noqa: PLC0415

    from entitlements._clients import aws_client, bounded_calls  # noqa: PLC0415
    from schema.erasure import serialize_erasure_message  # noqa: PLC0415

    setup = "run entitlements erasure setup"
    try:
        with bounded_calls():
            sns = aws_client(settings.aws, "sns")
            topic_arn = _topic_arn(sns, erasure.topic_name)
            if topic_arn is None:
                raise _fail(f"no erasure topic named {erasure.topic_name}: {setup}", code=2)
            try:
                responses_url = str(
                    aws_client(settings.aws, "sqs").get_queue_url(QueueName=erasure.responses_queue_name)[
                        "QueueUrl"
                    ]
                )
            except botocore.exceptions.ClientError:
                raise _fail(
                    f"no responses queue named {erasure.responses_queue_name}: {setup}", code=2
                ) from None
            sns.publish(TopicArn=topic_arn, Message=serialize_erasure_message(request))
    except botocore.exceptions.ClientError as failed:
        problem = f"the erasure channel refused the request ({type(failed).__name__}): check the endpoint"
        raise _fail(problem, code=2) from None
    # Any other botocore failure (an endpoint down or silent) reaches the CLI's one line, which names
    # the endpoint and the fix as for every command; nothing was published.
    return responses_url


def _await_answer(settings: Settings, responses_url: str, request_id: str, wait: int) -> str | None:
    """The body of the answer to `request_id`, taken off the responses queue; None after `wait` s."""
    import botocore.exceptions  # noqa: PLC0415

    from entitlements._clients import aws_client  # noqa: PLC0415

    # A long poll: its read timeout outlasts its wait (never inside bounded_calls).
    sqs = aws_client(settings.aws, "sqs", connect_timeout=5, read_timeout=_LONG_POLL_SECONDS + 10)
    deadline = time.monotonic() + wait
    held: dict[str, str] = {}  # others' answers this command holds invisible: message id -> receipt
    try:
        while (left := deadline - time.monotonic()) > 0:
            received = sqs.receive_message(
                QueueUrl=responses_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=max(1, min(_LONG_POLL_SECONDS, int(left))),
                # Someone else's answer (the account service reads this queue too) is left alone and
                # comes back after these few seconds: out of the way of ours, and never received in
                # a tight loop. Put back at once when the command ends.
                VisibilityTimeout=_FOREIGN_HOLD_SECONDS,
            ).get("Messages", [])
            for message in received:
                body = str(message.get("Body", ""))
                if _answer_to(request_id, body):
                    sqs.delete_message(QueueUrl=responses_url, ReceiptHandle=message["ReceiptHandle"])
                    return body
                held[str(message.get("MessageId", ""))] = message["ReceiptHandle"]
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as failed:
        problem = f"the responses queue did not answer ({type(failed).__name__}): check the endpoint"
        raise _fail(problem) from None
    finally:
        _put_back(sqs, responses_url, held.values())
    return None

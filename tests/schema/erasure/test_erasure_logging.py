"""No personal data in any log line of the parser or the sender, on any failure path.

Canary values are planted in bodies, keys and requestIds. The root logger is at DEBUG (botocore logs
request bodies there), and the handlers below log the caught error with `logger.exception`, so the
traceback is part of the text checked. Only the AWS SDK's own lines (botocore, boto3, urllib3) are left
out of the check, and one test shows they do carry the canaries: the capture sees bodies when they exist.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from schema.erasure import AckResponse, ErasureContractError, ErasureResponseSender, parse_erasure_request
from schema.erasure._errors import ErasureResponseSendError

CANARY_REQUEST_ID = "canary-request-id-5b1e9c"
CANARY_KEY = "canary-key-0d7f42@example.com"
CANARY_BODY = "canary-body-a81c3e"
CANARIES = (CANARY_REQUEST_ID, CANARY_KEY, CANARY_BODY)
SDK_LOGGERS = ("botocore", "boto3", "urllib3")
HANDLER_LOGGER = "tests.erasure.handler"
FORMATTER = logging.Formatter("%(name)s %(levelname)s %(message)s")

ERASE = {
    "type": "erasure/ERASE",
    "requestId": CANARY_REQUEST_ID,
    "sendNo": 1,
    "expiresAt": "2099-01-01T00:00:00.000Z",
    "keyKind": "ADDRESS",
    "key": CANARY_KEY,
    "note": CANARY_BODY,  # an extra field: INVALID_MESSAGE
}
ANSWER = {
    "type": "erasure/ACK",
    "requestId": CANARY_REQUEST_ID,
    "sendNo": 1,
    "subscriber": CANARY_BODY,
    "outcome": "DONE",
}
FAILING_BODIES = {
    "NOT_JSON": json.dumps(ERASE)[:-1] + ",NaN}",
    "NOT_JSON-bytes": json.dumps(ERASE).encode() + b"\xff",
    "INVALID_MESSAGE": json.dumps(ERASE),
    "INVALID_MESSAGE-bad-time": json.dumps({**ERASE, "note": None} | {"expiresAt": CANARY_BODY}),
    "INVALID_MESSAGE-upper-case-key": json.dumps(
        {k: v for k, v in ERASE.items() if k != "note"} | {"key": CANARY_KEY.upper()}
    ),
    "NOT_A_REQUEST": json.dumps(ANSWER),
}


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    """Every record outside the SDK's loggers, formatted as a handler would write it (tracebacks included)."""
    caplog.set_level(logging.DEBUG)
    for sdk_logger in SDK_LOGGERS:  # another test's entry point may have quietened them
        caplog.set_level(logging.DEBUG, logger=sdk_logger)
    assert logging.getLogger().getEffectiveLevel() == logging.DEBUG

    def lines() -> list[str]:
        return [
            FORMATTER.format(record) for record in caplog.records if not record.name.startswith(SDK_LOGGERS)
        ]

    yield lines


def _assert_clean(lines: list[str]) -> None:
    assert lines, "the failure path logged nothing at all: the check would be vacuous"
    for line in lines:
        for canary in CANARIES:
            assert canary not in line, line
            assert canary.upper() not in line, line


def _handle(body: str | bytes) -> None:
    """A store handler: parse, and on refusal log the error with its traceback, then let it propagate."""
    log = logging.getLogger(HANDLER_LOGGER)
    try:
        parse_erasure_request(body)
    except ErasureContractError:
        log.exception("erasure request refused")
        raise


@pytest.mark.parametrize("name", sorted(FAILING_BODIES))
def test_a_refused_body_leaves_no_canary_in_any_log_line(name: str, logs: Callable[[], list[str]]) -> None:
    with pytest.raises(ErasureContractError) as caught:
        _handle(FAILING_BODIES[name])
    assert str(caught.value) == name.split("-", maxsplit=1)[0]
    _assert_clean(logs())


def _send_and_log(sender: ErasureResponseSender, answer: Any) -> None:
    log = logging.getLogger(HANDLER_LOGGER)
    try:
        sender.send(answer)
    except (ErasureContractError, ErasureResponseSendError):
        log.exception("erasure answer not sent")
        raise


def test_an_invalid_answer_leaves_no_canary_in_any_log_line(logs: Callable[[], list[str]]) -> None:
    sender = ErasureResponseSender(object(), "http://127.0.0.1:1/q", logging.getLogger(HANDLER_LOGGER))  # type: ignore[arg-type]
    with pytest.raises(ErasureContractError):
        _send_and_log(sender, {**ANSWER, "outcome": CANARY_BODY})
    _assert_clean(logs())


class LeakyClient:
    """A client whose error quotes the request, as botocore's ParamValidationError does."""

    def send_message(self, **kwargs: Any) -> None:
        raise ValueError(f"Invalid parameter: {kwargs}")


def test_a_client_error_quoting_the_body_leaves_no_canary_in_any_log_line(
    logs: Callable[[], list[str]],
) -> None:
    sender = ErasureResponseSender(LeakyClient(), "http://127.0.0.1:1/q", logging.getLogger(HANDLER_LOGGER))
    with pytest.raises(ErasureResponseSendError) as caught:
        _send_and_log(sender, AckResponse.model_validate(ANSWER, by_alias=True, by_name=False))
    assert caught.value.code == "ValueError"
    _assert_clean(logs())


def test_an_sqs_send_failure_leaves_no_canary_in_our_log_lines(
    sqs_client: Any, moto_endpoint: str, caplog: pytest.LogCaptureFixture, logs: Callable[[], list[str]]
) -> None:
    missing = f"{moto_endpoint}/123456789012/no-such-queue"
    sender = ErasureResponseSender(sqs_client, missing, logging.getLogger(HANDLER_LOGGER))
    with pytest.raises(ErasureResponseSendError):
        _send_and_log(sender, ANSWER)
    _assert_clean(logs())
    # The capture is not blind: botocore did log the body at DEBUG.
    sdk_text = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith(SDK_LOGGERS))
    assert CANARY_REQUEST_ID in sdk_text


def test_the_sent_answer_itself_leaves_no_canary_in_our_log_lines(
    sqs_client: Any, queue_url: str, logs: Callable[[], list[str]]
) -> None:
    ErasureResponseSender(sqs_client, queue_url, logging.getLogger(HANDLER_LOGGER)).send(ANSWER)
    for line in logs():
        assert not any(canary in line for canary in CANARIES), line

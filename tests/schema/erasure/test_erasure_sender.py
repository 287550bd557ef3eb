"""schema/erasure/_sender.py: answers only, validated first, sent bare, failures reported by code."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from schema.erasure import CAPABILITY_FIXTURES as FIXTURES
from schema.erasure import (
    AckResponse,
    ErasureContractError,
    ErasureResponseSender,
    HoldingsResponse,
    RefileAckResponse,
    parse_erasure_message,
)
from schema.erasure._errors import ErasureContractErrorCode, ErasureResponseSendError
from schema.errors import RetryableError
from tests.schema.erasure.erasure_test_support import receive_all

LOGGER = "tests.erasure.sender"
ACK = AckResponse(request_id="req-1", send_no=2, subscriber="space", outcome="DONE")
REFILE_ACK = RefileAckResponse(request_id="req-2", send_no=1, subscriber="space", outcome="NONE_OWNED")
HOLDINGS = HoldingsResponse(
    request_id="req-3", subscriber="space", key_kind="ADDRESS", key="\u212aelvin@x", answer="HOLDS_NONE"
)


class RecordingClient:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.error = error

    def send_message(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        return {"MessageId": "m-1"}


def _sender(client: Any, queue_url: str = "http://127.0.0.1:1/queue") -> ErasureResponseSender:
    return ErasureResponseSender(client, queue_url, logging.getLogger(LOGGER))


@pytest.mark.parametrize("answer", [ACK, REFILE_ACK, HOLDINGS], ids=["ACK", "REFILE_ACK", "HOLDINGS"])
def test_a_sent_answer_arrives_intact_and_without_attributes(
    answer: Any, sqs_client: Any, queue_url: str
) -> None:
    _sender(sqs_client, queue_url).send(answer)
    [message] = receive_all(sqs_client, queue_url)
    assert parse_erasure_message(message["Body"]) == answer
    assert "MessageAttributes" not in message
    assert "MD5OfMessageAttributes" not in message


def test_a_dict_answer_is_accepted_and_sent_in_its_wire_form(sqs_client: Any, queue_url: str) -> None:
    wire = {
        "type": "erasure/ACK",
        "requestId": "req-1",
        "sendNo": 1.0,
        "subscriber": "space",
        "outcome": "DONE",
    }
    _sender(sqs_client, queue_url).send(wire)
    [message] = receive_all(sqs_client, queue_url)
    assert json.loads(message["Body"]) == {**wire, "sendNo": 1}


def test_only_queue_url_and_body_are_passed_to_the_client() -> None:
    client = RecordingClient()
    _sender(client).send(ACK)
    [call] = client.calls
    assert set(call) == {"QueueUrl", "MessageBody"}


@pytest.mark.parametrize(
    "not_an_answer",
    [
        FIXTURES.pairs[0].request,
        {"type": "erasure/ACK", "requestId": "req-1", "sendNo": 1, "subscriber": "space", "outcome": "MOVED"},
        {"type": "erasure/ACK", "requestId": "req-1", "sendNo": 1, "subscriber": "space"},
        {"type": "erasure/ACK", "request_id": "req-1", "sendNo": 1, "subscriber": "space", "outcome": "DONE"},
        {
            "type": "erasure/HOLDINGS",
            "requestId": "r",
            "subscriber": "s",
            "keyKind": "ADDRESS",
            "key": "A@x",
            "answer": "HOLDS_NONE",
        },
        AckResponse.model_construct(request_id="", send_no=1, subscriber="space", outcome="DONE"),
        AckResponse.model_construct(request_id=object(), send_no=1, subscriber="space", outcome="DONE"),
        '{"type":"erasure/ACK"}',
        None,
    ],
    ids=[
        "a-request",
        "wrong-outcome",
        "missing-outcome",
        "snake-case",
        "upper-case-address",
        "unvalidated-model",
        "unserialisable-model",
        "a-string",
        "none",
    ],
)
def test_anything_but_a_valid_answer_raises_before_anything_is_sent(not_an_answer: Any) -> None:
    client = RecordingClient()
    with pytest.raises(ErasureContractError) as caught:
        _sender(client).send(not_an_answer)
    assert caught.value.code is ErasureContractErrorCode.INVALID_MESSAGE
    assert client.calls == []


def test_a_send_failure_against_sqs_raises_with_the_error_code(
    sqs_client: Any, moto_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    missing_queue = f"{moto_endpoint}/123456789012/no-such-queue"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ErasureResponseSendError) as caught:
        _sender(sqs_client, missing_queue).send(ACK)
    error = caught.value
    assert isinstance(error, RetryableError)
    assert error.code == str(error)
    assert "NonExistentQueue" in error.code or "QueueDoesNotExist" in error.code
    assert error.failed_sends == 1
    assert error.__cause__ is None and error.__context__ is None


def test_a_send_failure_logs_only_the_code_and_the_count(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sender = _sender(RecordingClient(RuntimeError("boom")))
    for _ in range(2):
        with pytest.raises(ErasureResponseSendError):
            sender.send(ACK)
    records = [record for record in caplog.records if record.name == LOGGER]
    assert [record.getMessage() for record in records] == [
        "erasure response send failed: code=RuntimeError failed_sends=1",
        "erasure response send failed: code=RuntimeError failed_sends=2",
    ]
    assert all(record.levelno == logging.ERROR and record.exc_info is None for record in records)
    assert sender.failed_sends == 2


def test_the_moto_failure_is_logged_as_code_and_count(
    sqs_client: Any, moto_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ErasureResponseSendError) as caught:
        _sender(sqs_client, f"{moto_endpoint}/123456789012/no-such-queue").send(ACK)
    [record] = [record for record in caplog.records if record.name == LOGGER]
    assert record.getMessage() == f"erasure response send failed: code={caught.value.code} failed_sends=1"


def test_an_error_code_that_is_not_an_identifier_is_replaced_by_the_exception_class() -> None:
    class ClientError(Exception):
        response = {"Error": {"Code": 'bad code with body {"requestId": "req-1"}'}}

    with pytest.raises(ErasureResponseSendError) as caught:
        _sender(RecordingClient(ClientError("x"))).send(ACK)
    assert caught.value.code == "ClientError"


def test_a_sender_without_a_logger_uses_its_modules_logger(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ErasureResponseSendError):
        ErasureResponseSender(RecordingClient(OSError("down")), "http://127.0.0.1:1/q").send(ACK)
    assert [record.name for record in caplog.records] == ["schema.erasure._sender"]

"""Helpers shared by the erasure subscriber's tests (importable by name: the test folder is on sys.path)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from config import ErasureSettings
from devstack._writes import cancellation_record, entitlement_row, stale_record
from processors.erasure import ErasureChannel, ErasureWorker
from schema.erasure import (
    CheckRequest,
    EraseRequest,
    ErasureRequest,
    parse_erasure_message,
    serialize_erasure_message,
)
from schema.table import EntitlementStatus

LONG_AGO = datetime(2026, 1, 1, tzinfo=UTC)


def erase(
    key: str, *, send_no: int = 1, expires_in: float = 3300.0, request_id: str | None = None
) -> EraseRequest:
    return EraseRequest(
        request_id=request_id or f"req-{uuid.uuid4().hex}",
        send_no=send_no,
        expires_at=datetime.now(UTC) + timedelta(seconds=expires_in),
        key_kind="ACCOUNT",
        key=key,
    )


def check(key: str, *, request_id: str | None = None) -> CheckRequest:
    return CheckRequest(
        request_id=request_id or f"req-{uuid.uuid4().hex}",
        expires_at=datetime.now(UTC) + timedelta(seconds=3300),
        key_kind="ACCOUNT",
        key=key,
    )


_WRITTEN_AT = datetime(2026, 1, 2, tzinfo=UTC)
_TTL = {"N": "1900000000"}


def entitlement_item(user_id: str, account: str, status: str) -> dict[str, Any]:
    """An entitlement row as the service writes it (devstack's builder), in DynamoDB's JSON."""
    return entitlement_row(
        user_id, account, status=EntitlementStatus(status), processor_token="ptok-erasure", now=_WRITTEN_AT
    )


def cleanup_item(user_id: str, account: str, *, cancellation: bool) -> dict[str, Any]:
    """A cancellation or stale-account record as the service writes it, in DynamoDB's JSON."""
    build = cancellation_record if cancellation else stale_record
    return build(user_id, account, ttl=_TTL, now=_WRITTEN_AT)


@dataclass
class Responses:
    """Everything read from the responses queue, parsed."""

    sqs: Any
    url: str
    seen: list[Any] = field(default_factory=list)

    def collect(self) -> list[Any]:
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            if not batch:
                return self.seen
            for message in batch:
                self.seen.append(parse_erasure_message(message["Body"]))
                self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])

    def for_request(self, request_id: str) -> list[Any]:
        return [answer for answer in self.collect() if answer.request_id == request_id]


@dataclass
class Stack:
    """A channel on moto, a worker on it and the answers it gives."""

    settings: ErasureSettings
    sqs: Any
    sns: Any
    channel: ErasureChannel
    worker: ErasureWorker
    responses: Responses

    def publish(self, request: ErasureRequest | str) -> None:
        body = request if isinstance(request, str) else serialize_erasure_message(request)
        self.sns.publish(TopicArn=self.channel.topic_arn, Message=body)

    def drive(self, until: Callable[[], bool], *, timeout: float = 60.0) -> None:
        """Poll the worker (one-second long polls) until `until()` holds."""
        stop_at = time.monotonic() + timeout
        while not until():
            if time.monotonic() > stop_at:
                raise AssertionError("the worker did not get there in time")
            self.worker.poll_once(wait_seconds=1)

    def answer_to(self, request_id: str, *, timeout: float = 60.0) -> Any:
        """The first answer to `request_id` read from now on."""
        self.responses.collect()
        start = len(self.responses.seen)

        def new_answers() -> list[Any]:
            return [a for a in self.responses.collect()[start:] if a.request_id == request_id]

        self.drive(lambda: bool(new_answers()), timeout=timeout)
        return new_answers()[0]

    def queue_depths(self, url: str) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return sum(int(value) for value in attributes.values())


def adapter_bytes(record: dict[str, Any]) -> bytes:
    """A boto3 GetRecords record in the KCL adapter's shape (epoch milliseconds), as the consumer's
    quarantine and parked work keep it."""
    dynamodb = dict(record["dynamodb"])
    created = dynamodb["ApproximateCreationDateTime"]
    if isinstance(created, datetime):
        dynamodb["ApproximateCreationDateTime"] = int(created.timestamp() * 1000)
    shaped = {name: value for name, value in record.items() if name not in ("dynamodb", "userIdentity")}
    shaped["dynamodb"] = dynamodb
    return json.dumps(shaped, default=str).encode()


def body_of(request: ErasureRequest) -> str:
    return serialize_erasure_message(request)

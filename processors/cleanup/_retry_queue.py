"""The durable retry queue for parked cleanups (SQS), and its own dead-letter queue.

Both keep messages for 14 days (SQS's maximum). The retry worker re-sends work it still cannot finish as
a new message (so an outage that lasts longer than 14 days still loses nothing while the worker runs);
the dead-letter queue receives only messages the worker repeatedly could not process at all.
"""

from __future__ import annotations

__all__ = [
    "MAYBE_TAKEN_CODES",
    "RETENTION_SECONDS",
    "RetryQueues",
    "SqsAdminClient",
    "ensure_retry_queues",
    "park_many",
    "park_work",
    "queue_counts",
]

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from processors.cleanup._clients import SqsClient
from processors.cleanup._errors import RetryQueueError
from processors.cleanup._work import CleanupWork
from schema.aws_errors import aws_error_code

RETENTION_SECONDS = 14 * 24 * 3600  # 1,209,600: SQS's maximum
MAX_DELAY_SECONDS = 900  # SQS's maximum DelaySeconds
_SQS_MAX_BATCH = 10
# botocore's errors for a request that was sent and got no answer: SQS may have taken the messages (the
# stream handler counts such a send as sent; the retry worker keeps the message it re-parked instead).
MAYBE_TAKEN_CODES = frozenset({"ReadTimeoutError", "ConnectionClosedError"})


# What SQS counts on a queue, by the name the project gives each count.
_COUNTS = {
    "visible": "ApproximateNumberOfMessages",
    "in_flight": "ApproximateNumberOfMessagesNotVisible",
    "delayed": "ApproximateNumberOfMessagesDelayed",
}


def queue_counts(sqs: SqsClient | SqsAdminClient, queue_url: str) -> dict[str, int]:
    """The queue's messages: visible, in flight (received, not yet deleted) and delayed (SQS's
    approximate counts)."""
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=list(_COUNTS.values()))
    return {name: int(attributes["Attributes"].get(attribute, 0)) for name, attribute in _COUNTS.items()}


class SqsAdminClient(Protocol):
    def create_queue(self, **kwargs: Any) -> Any: ...

    def get_queue_attributes(self, **kwargs: Any) -> Any: ...

    def set_queue_attributes(self, **kwargs: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class RetryQueues:
    queue_url: str
    queue_arn: str
    dlq_url: str
    dlq_arn: str


def _queue(sqs: SqsAdminClient, name: str, attributes: dict[str, str]) -> tuple[str, str]:
    url = str(sqs.create_queue(QueueName=name)["QueueUrl"])
    # create_queue refuses differing attributes on an existing queue; setting them is idempotent.
    sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, str(arn)


def ensure_retry_queues(
    sqs: SqsAdminClient,
    queue_name: str,
    *,
    dlq_name: str | None = None,
    visibility_timeout_seconds: int = 120,
    max_receive_count: int = 10,
) -> RetryQueues:
    """Create (or bring up to date) the retry queue and its dead-letter queue. Idempotent.

    `visibility_timeout_seconds` must exceed the worker's time budget for one message."""
    if not 0 <= visibility_timeout_seconds <= 43_200:
        raise ValueError("SQS visibility timeout must be within 0..43200 seconds")
    if max_receive_count < 1:
        raise ValueError("max_receive_count must be at least 1")
    dlq_url, dlq_arn = _queue(
        sqs, dlq_name or f"{queue_name}-dlq", {"MessageRetentionPeriod": str(RETENTION_SECONDS)}
    )
    queue_url, queue_arn = _queue(
        sqs,
        queue_name,
        {
            "MessageRetentionPeriod": str(RETENTION_SECONDS),
            "VisibilityTimeout": str(visibility_timeout_seconds),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive_count)}
            ),
        },
    )
    return RetryQueues(queue_url=queue_url, queue_arn=queue_arn, dlq_url=dlq_url, dlq_arn=dlq_arn)


def _delay(seconds: int) -> int:
    return max(0, min(MAX_DELAY_SECONDS, seconds))


def park_work(sqs: SqsClient, queue_url: str, work: CleanupWork, *, delay_seconds: int = 0) -> None:
    """Put the work on the retry queue. Raises `RetryQueueError` if SQS did not take it."""
    try:
        sqs.send_message(
            QueueUrl=queue_url, MessageBody=work.model_dump_json(), DelaySeconds=_delay(delay_seconds)
        )
    except (ClientError, BotoCoreError) as failed:
        raise RetryQueueError(aws_error_code(failed), context=work.context) from None


def park_many(sqs: SqsClient, queue_url: str, works: Sequence[tuple[CleanupWork, int]]) -> list[str | None]:
    """Park many (work, delay seconds) pairs, ten to a SendMessageBatch call. Returns, per pair in order,
    None when SQS took it or a short error code when it did not."""
    results: list[str | None] = [None] * len(works)
    for start in range(0, len(works), _SQS_MAX_BATCH):
        chunk = works[start : start + _SQS_MAX_BATCH]
        entries = [
            {"Id": str(index), "MessageBody": work.model_dump_json(), "DelaySeconds": _delay(delay)}
            for index, (work, delay) in enumerate(chunk)
        ]
        try:
            response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        except (ClientError, BotoCoreError) as failed:
            for index in range(len(chunk)):
                results[start + index] = aws_error_code(failed)
            continue
        for failure in response.get("Failed", []):
            results[start + int(failure["Id"])] = str(failure.get("Code") or "Failed")
    return results

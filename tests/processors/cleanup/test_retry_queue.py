"""processors/cleanup/_retry_queue.py: parked cleanups on SQS, ten to a batch, failures by code."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from processors.cleanup._errors import RetryQueueError
from processors.cleanup._retry_queue import (
    MAX_DELAY_SECONDS,
    ensure_retry_queues,
    park_many,
    park_work,
    queue_counts,
)
from processors.cleanup._work import CleanupWork

THROTTLED = ClientError({"Error": {"Code": "ThrottlingException"}}, "SendMessage")


def work(n: int = 1) -> CleanupWork:
    return CleanupWork(
        user_id=f"u{n}",
        array_account_id=f"a{n}",
        cleanup_kind="cancellation",
        source_event_id=f"e{n}",
        source_stream_arn="arn",
        source_shard_id="shardId-1",
        source_sequence_number=str(100 + n),
    )


class Sqs:
    def __init__(self, fail: Exception | None = None, failed_ids: tuple[str, ...] = ()) -> None:
        self.fail = fail
        self.failed_ids = failed_ids
        self.sent: list[dict[str, Any]] = []
        self.batches: list[list[dict[str, Any]]] = []

    def send_message(self, **request: Any) -> dict[str, Any]:
        if self.fail:
            raise self.fail
        self.sent.append(request)
        return {}

    def send_message_batch(self, **request: Any) -> dict[str, Any]:
        if self.fail:
            raise self.fail
        self.batches.append(request["Entries"])
        failed = [{"Id": i, "Code": "InternalError"} for i in self.failed_ids if len(self.batches) == 1]
        return {"Failed": failed}


def test_a_parked_work_is_sent_with_its_delay_capped_at_sqs_maximum() -> None:
    sqs = Sqs()
    park_work(sqs, "url", work(), delay_seconds=10_000)  # type: ignore[arg-type]
    assert sqs.sent[0]["DelaySeconds"] == MAX_DELAY_SECONDS
    assert CleanupWork.model_validate_json(sqs.sent[0]["MessageBody"]) == work()


def test_a_queue_that_refuses_the_work_raises_a_retry_queue_error_with_its_code() -> None:
    with pytest.raises(RetryQueueError) as raised:
        park_work(Sqs(fail=THROTTLED), "url", work())  # type: ignore[arg-type]
    assert raised.value.code == "ThrottlingException"


def test_many_go_ten_to_a_batch_and_each_failure_is_reported_at_its_place() -> None:
    sqs = Sqs(failed_ids=("3",))
    results = park_many(sqs, "url", [(work(n), 0) for n in range(12)])  # type: ignore[arg-type]
    assert [len(batch) for batch in sqs.batches] == [10, 2]
    assert [i for i, code in enumerate(results) if code] == [3]


def test_a_batch_the_queue_refuses_whole_reports_every_pair_of_it() -> None:
    assert park_many(Sqs(fail=THROTTLED), "url", [(work(1), 0), (work(2), 0)]) == ["ThrottlingException"] * 2  # type: ignore[arg-type]


def test_a_visibility_timeout_sqs_would_refuse_is_refused_before_any_call() -> None:
    with pytest.raises(ValueError, match="visibility timeout"):
        ensure_retry_queues(object(), "q", visibility_timeout_seconds=50_000)  # type: ignore[arg-type]


class _Counting:
    def get_queue_attributes(self, **request: Any) -> dict[str, Any]:
        assert request["QueueUrl"] == "http://127.0.0.1:1/q"
        counts = {"ApproximateNumberOfMessages": "2", "ApproximateNumberOfMessagesNotVisible": "1"}
        return {"Attributes": {**counts, "ApproximateNumberOfMessagesDelayed": "4"}}


def test_queue_counts_gives_visible_in_flight_and_delayed_messages() -> None:
    counts = queue_counts(_Counting(), "http://127.0.0.1:1/q")  # type: ignore[arg-type]
    assert counts == {"visible": 2, "in_flight": 1, "delayed": 4}

"""The retry queue and the retry worker, on moto's SQS and DynamoDB with the fake Array."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from adapters import HttpArrayClient
from devstack.fake_array import FakeArrayServer
from processors.cleanup import (
    CleanupHandler,
    LocalDeletionNotes,
    RetryQueues,
    ensure_retry_queues,
)
from processors.cleanup._retry_queue import RETENTION_SECONDS, park_work
from processors.cleanup._work import work_from_event
from processors.cleanup.retry_worker import RetryWorker
from schema.outcomes import FINAL_CLEANUP_OUTCOMES, OutcomeKind
from schema.table import ItemKind
from tests.processors.cleanup.cleanup_helpers import FixedClock, ListSink, make_expiry

K = OutcomeKind


def _attributes(sqs: Any, url: str) -> dict[str, str]:
    return dict(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"])


def test_the_retry_queue_keeps_messages_14_days_and_redrives_to_its_own_dead_letter_queue(sqs: Any) -> None:
    queues = ensure_retry_queues(sqs, f"retry-{uuid.uuid4().hex[:8]}", max_receive_count=7)
    main, dlq = _attributes(sqs, queues.queue_url), _attributes(sqs, queues.dlq_url)
    assert int(main["MessageRetentionPeriod"]) >= 14 * 24 * 3600 == RETENTION_SECONDS
    assert int(dlq["MessageRetentionPeriod"]) >= 14 * 24 * 3600
    redrive = json.loads(main["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == queues.dlq_arn
    assert int(redrive["maxReceiveCount"]) == 7
    assert queues.dlq_url != queues.queue_url


def test_ensuring_the_queues_twice_is_idempotent(sqs: Any) -> None:
    name = f"retry-{uuid.uuid4().hex[:8]}"
    assert ensure_retry_queues(sqs, name) == ensure_retry_queues(sqs, name)


@pytest.fixture
def park(make_handler: Callable[..., CleanupHandler]) -> Callable[..., ListSink]:
    """Run expiries through the handler while Array refuses our credentials: all of them park."""

    def run(fake_array: FakeArrayServer, *pairs: tuple[str, str]) -> ListSink:
        sink = ListSink()
        handler = make_handler(sink=sink)
        fake_array.expire_credentials()
        for user, account in pairs:
            handler.add(make_expiry(user, account, ItemKind.CANCELLATION))
        handler.flush()
        fake_array.restore_credentials()
        assert sink.kinds().count(K.CLEANUP_PARKED) == len(pairs)
        return sink

    return run


@pytest.fixture
def make_worker(
    dynamodb: Any,
    sqs: Any,
    table: str,
    retry_queues: RetryQueues,
    array_client: HttpArrayClient,
    sink: ListSink,
    clock: FixedClock,
) -> Callable[..., RetryWorker]:
    def make(**overrides: Any) -> RetryWorker:
        arguments: dict[str, Any] = {
            "sqs": sqs,
            "dynamodb": dynamodb,
            "array": array_client,
            "table_name": table,
            "queue_url": retry_queues.queue_url,
            "sink": sink,
            "clock": clock,
            "retry_budget_seconds": 3.0,
            "repark_base_delay_seconds": 0,
            "wait_time_seconds": 0,
        }
        arguments.update(overrides)
        return RetryWorker(**arguments)

    return make


def test_the_worker_drains_parked_work_deletes_the_account_and_marks_the_row(
    park: Callable[..., ListSink],
    make_worker: Callable[..., RetryWorker],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sink: ListSink,
    sqs: Any,
    retry_queues: RetryQueues,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    park(fake_array, ("u1", "acct-1"))
    report = make_worker().drain(max_seconds=30)
    assert report.empty
    assert report.finished == 1
    assert fake_array.deleted_users() == ["acct-1"]
    assert (get_row("u1", "acct-1") or {})["status"] == "Removed"
    assert sink.kinds() == [K.CLEANUP_RETRIED, K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED]
    assert {o.attempt for o in sink.outcomes} == {1}
    assert sink.outcomes[0].detail == "401"


def test_work_parked_for_its_mark_alone_is_marked_without_calling_array(
    make_worker: Callable[..., RetryWorker],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sink: ListSink,
    sqs: Any,
    retry_queues: RetryQueues,
) -> None:
    fake_array.add_users(["acct-1"])  # were Array asked again, it would delete (and the test see it)
    put_row("u1", "acct-1", "Cancelled")
    work = work_from_event(make_expiry("u1", "acct-1", ItemKind.CANCELLATION)).model_copy(
        update={"attempt": 1, "park_reason": "mark:deadline", "delete_sent": True, "final_state": "deleted"}
    )
    park_work(sqs, retry_queues.queue_url, work)
    report = make_worker().drain(max_seconds=30)
    assert report.empty
    assert fake_array.calls() == []
    assert (get_row("u1", "acct-1") or {})["status"] == "Removed"
    assert sink.kinds() == [K.CLEANUP_RETRIED, K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED]


def test_work_still_failing_is_reparked_with_the_next_attempt(
    park: Callable[..., ListSink],
    make_worker: Callable[..., RetryWorker],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
    drain_queue: Callable[[str], list[dict[str, Any]]],
    retry_queues: RetryQueues,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    park(fake_array, ("u1", "acct-1"))
    fake_array.set_faults(error_rate=1.0)
    result = make_worker().run_once()
    assert (result.received, result.reparked, result.finished) == (1, 1, 0)
    assert sink.kinds() == [K.CLEANUP_RETRIED, K.CLEANUP_PARKED]
    [message] = drain_queue(retry_queues.queue_url)
    body = json.loads(message["Body"])
    assert body["attempt"] == 2
    assert body["park_reason"] in {"500", "502", "503"}


def test_a_parked_delete_array_applied_unseen_is_reported_already_deleted_after_it_on_any_host(
    make_handler: Callable[..., CleanupHandler],
    make_worker: Callable[..., RetryWorker],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
    tmp_path: Path,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    # Every request times out after Array applied it: the stream attempt parks its work.
    fake_array.set_faults(timeout_rate=1.0, hang_seconds=1.0)
    handler = make_handler(sink=ListSink(), deletion_notes=LocalDeletionNotes(tmp_path / "stream-host"))
    handler.add(make_expiry("u1", "acct-1", ItemKind.CANCELLATION))
    handler.flush()
    fake_array.clear_faults()
    assert fake_array.deleted_users() == ["acct-1"]
    worker = make_worker(deletion_notes=LocalDeletionNotes(tmp_path / "worker-host"))  # no note of it
    worker.drain(max_seconds=30)
    [final] = [o for o in sink.outcomes if o.kind in FINAL_CLEANUP_OUTCOMES]
    assert (final.kind, final.detail) == (K.CLEANUP_ALREADY_DELETED, "earlier_attempt")


@pytest.mark.parametrize("apart", [False, True], ids=["same-pass", "later-pass"])
def test_a_doubled_retry_message_makes_one_delete(
    park: Callable[..., ListSink],
    make_worker: Callable[..., RetryWorker],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sqs: Any,
    retry_queues: RetryQueues,
    drain_queue: Callable[[str], list[dict[str, Any]]],
    sink: ListSink,
    tmp_path: Path,
    apart: bool,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    park(fake_array, ("u1", "acct-1"))
    [message] = drain_queue(retry_queues.queue_url)  # taken off, then sent twice (at-least-once)
    sqs.delete_message(QueueUrl=retry_queues.queue_url, ReceiptHandle=message["ReceiptHandle"])
    worker = make_worker(deletion_notes=LocalDeletionNotes(tmp_path / "notes"))
    sqs.send_message(QueueUrl=retry_queues.queue_url, MessageBody=message["Body"])
    if apart:
        worker.drain(max_seconds=30)
    sqs.send_message(QueueUrl=retry_queues.queue_url, MessageBody=message["Body"])
    report = worker.drain(max_seconds=30)
    assert report.empty
    assert [c.status for c in fake_array.calls_for("acct-1")] == [401, 200]  # the park's, then one delete
    finals = {(o.outcome_id, o.kind) for o in sink.outcomes if o.kind in FINAL_CLEANUP_OUTCOMES}
    assert [kind for _id, kind in finals] == [K.CLEANUP_DELETED]


def test_the_worker_applies_the_guard_again(
    park: Callable[..., ListSink],
    make_worker: Callable[..., RetryWorker],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    park(fake_array, ("u1", "acct-1"))
    put_row("u1", "acct-1", "Active")  # reactivated while parked
    fake_array.reset_calls()
    make_worker().drain(max_seconds=30)
    assert fake_array.calls() == []
    assert sink.kinds() == [K.CLEANUP_RETRIED, K.CLEANUP_REFUSED_BY_GUARD]


def test_a_message_stays_queued_when_its_outcomes_could_not_be_flushed(
    park: Callable[..., ListSink],
    make_worker: Callable[..., RetryWorker],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sqs: Any,
    retry_queues: RetryQueues,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    park(fake_array, ("u1", "acct-1"))

    def lake_down() -> None:
        raise OSError("lake unavailable")

    with pytest.raises(OSError):
        make_worker(flush_outcomes=lake_down).run_once()
    attributes = _attributes(sqs, retry_queues.queue_url)
    assert int(attributes["ApproximateNumberOfMessagesNotVisible"]) == 1


def test_an_unreadable_message_ends_in_the_dead_letter_queue(
    make_worker: Callable[..., RetryWorker], sqs: Any
) -> None:
    queues = ensure_retry_queues(
        sqs, f"retry-{uuid.uuid4().hex[:8]}", visibility_timeout_seconds=1, max_receive_count=1
    )
    sqs.send_message(QueueUrl=queues.queue_url, MessageBody="not a cleanup")
    worker = make_worker(queue_url=queues.queue_url)
    assert worker.run_once().malformed == 1
    moved: list[Any] = []
    for _ in range(50):
        time.sleep(0.1)
        worker.run_once()  # a receive after the visibility timeout lets SQS redrive it
        moved = sqs.receive_message(QueueUrl=queues.dlq_url, MaxNumberOfMessages=10).get("Messages", [])
        if moved:
            break
    assert [m["Body"] for m in moved] == ["not a cleanup"]


def test_repark_delays_grow_and_stay_within_sqs_limits(make_worker: Callable[..., RetryWorker]) -> None:
    worker = make_worker(repark_base_delay_seconds=30)
    delays = [worker.repark_delay(attempt) for attempt in range(1, 12)]
    assert delays[:3] == [30, 60, 120]
    assert delays == sorted(delays)
    assert max(delays) == 900


class _ThrottledSqs:
    """An SQS client whose receive is throttled; it asks the worker to stop after the first failure."""

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop

    def receive_message(self, **kwargs: Any) -> Any:
        self._stop.set()
        raise ClientError(
            {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "ReceiveMessage"
        )


def test_a_failed_pass_is_logged_by_its_aws_error_code(caplog: pytest.LogCaptureFixture) -> None:
    stop = threading.Event()
    worker = RetryWorker(
        sqs=_ThrottledSqs(stop),  # type: ignore[arg-type]
        dynamodb=None,  # type: ignore[arg-type]
        array=None,  # type: ignore[arg-type]
        table_name="t",
        queue_url="http://127.0.0.1:1/q",
        sink=ListSink(),
        clock=FixedClock(),
    )
    with caplog.at_level(logging.WARNING):
        worker.run_forever(stop)
    assert [getattr(r, "code", None) for r in caplog.records if r.msg == "retry worker pass failed"] == [
        "ThrottlingException"
    ]

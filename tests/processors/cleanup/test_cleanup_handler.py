"""The cleanup handler against moto (table, GSI1, SQS) and the fake Array over real HTTP."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from adapters import ArrayRequestRejected, ArrayTransientError, HttpArrayClient
from devstack.fake_array import FakeArrayServer
from pipeline.events import (
    ChangeKind,
    CleanupCancelled,
    CleanupScheduled,
    EntitlementCreated,
    EntitlementRemoved,
    EntitlementStatusChanged,
    StreamEvent,
    UnknownItemChanged,
)
from processors.cleanup import (
    CleanupHandler,
    LocalDeletionNotes,
    RetryQueues,
)
from processors.cleanup._errors import RetryQueueError
from schema.errors import RecordRejected
from schema.outcomes import FINAL_CLEANUP_OUTCOMES, OutcomeKind
from schema.table import EntitlementRow, ItemKind, UnknownItem
from tests.processors.cleanup.cleanup_helpers import NOW, ListSink, make_expiry

K = OutcomeKind


@pytest.fixture
def make_handler(make_handler: Callable[..., CleanupHandler]) -> Callable[..., CleanupHandler]:
    """conftest's handler, with a smaller pool and a short retry budget unless a test sets them."""

    def make(**overrides: Any) -> CleanupHandler:
        return make_handler(**{"concurrency": 4, "retry_budget_seconds": 3.0, **overrides})

    return make


def _run(handler: CleanupHandler, *events: StreamEvent) -> None:
    for event in events:
        handler.add(event)
    handler.flush()


def _parked(sqs: Any, queues: RetryQueues, drain_queue: Callable[[str], list[dict[str, Any]]]) -> list[Any]:
    return [json.loads(m["Body"]) for m in drain_queue(queues.queue_url)]


def _entitlement_row(user: str, account: str, status: str) -> EntitlementRow:
    return EntitlementRow(
        pk=f"USER#{user}", sk=f"ENTITLEMENT#{account}", userId=user, arrayAccountId=account, status=status
    )


def _other_events(user: str, account: str) -> list[StreamEvent]:
    """Every event that must never delete an account: a service delete of a cleanup record, an entitlement
    REMOVE, an INSERT and a MODIFY."""
    expired = make_expiry(user, account, ItemKind.CANCELLATION)
    base = {
        name: value
        for name, value in msgspec.structs.asdict(expired).items()
        if name not in ("ttl_deletion", "old_item", "new_item")
    }
    record = expired.old_item
    assert record is not None
    row = _entitlement_row(user, account, "Cancelled")
    return [
        CleanupCancelled(**base, old_item=record),
        EntitlementRemoved(**{**base, "item_kind": ItemKind.ENTITLEMENT}, old_item=row),
        CleanupScheduled(**{**base, "change": ChangeKind.INSERT}, new_item=record),
        EntitlementCreated(
            **{**base, "change": ChangeKind.INSERT, "item_kind": ItemKind.ENTITLEMENT},
            new_item=_entitlement_row(user, account, "Active"),
        ),
        EntitlementStatusChanged(
            **{**base, "change": ChangeKind.MODIFY, "item_kind": ItemKind.ENTITLEMENT},
            old_item=_entitlement_row(user, account, "Active"),
            new_item=row,
            from_status="Active",
            to_status="Cancelled",
        ),
    ]


def test_the_handler_is_named_cleanup_in_logs_metrics_and_parked_files(
    make_handler: Callable[..., CleanupHandler],
) -> None:
    assert make_handler().name == "cleanup"


@pytest.mark.parametrize(
    "index", range(5), ids=["service-delete", "row-remove", "insert", "modify", "row-insert"]
)
def test_no_event_other_than_a_ttl_removal_of_a_cleanup_record_deletes_an_account(
    index: int,
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    _run(make_handler(), _other_events("u1", "acct-1")[index])
    assert fake_array.calls() == []
    assert fake_array.has_user("acct-1")
    assert sink.outcomes == []


def test_a_ttl_removal_of_a_cleanup_record_deletes_its_account_and_marks_the_row_removed(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    _run(make_handler(), make_expiry("u1", "acct-1", ItemKind.CANCELLATION))
    assert fake_array.deleted_users() == ["acct-1"]
    assert sink.kinds() == [K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED]
    row = get_row("u1", "acct-1")
    assert row is not None
    assert row["status"] == "Removed"
    assert row["updatedAt"] == "2026-03-01T12:00:00.000Z"  # NOW, in the table's business-time form


def test_the_account_the_record_names_is_deleted_never_the_users_current_one(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
) -> None:
    fake_array.add_users(["acct-old", "acct-new"])
    put_row("u1", "acct-old", "Superseded")
    put_row("u1", "acct-new", "Active")
    _run(make_handler(), make_expiry("u1", "acct-old", ItemKind.STALE))
    assert fake_array.deleted_users() == ["acct-old"]
    assert fake_array.calls_for("acct-new") == []
    assert (get_row("u1", "acct-old") or {})["status"] == "Removed"
    assert (get_row("u1", "acct-new") or {})["status"] == "Active"


def test_a_404_from_array_is_success_and_the_row_is_still_marked(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sink: ListSink,
    retry_queues: RetryQueues,
    sqs: Any,
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    put_row("u1", "acct-gone", "Superseded")  # never registered at the fake Array: it answers 404
    _run(make_handler(), make_expiry("u1", "acct-gone"))
    assert [c.status for c in fake_array.calls()] == [404]
    assert sink.kinds() == [K.CLEANUP_ALREADY_DELETED, K.CLEANUP_ROW_MARKED]
    assert sink.outcomes[0].detail == "404"
    assert (get_row("u1", "acct-gone") or {})["status"] == "Removed"
    assert _parked(sqs, retry_queues, drain_queue) == []


def test_a_replayed_expiry_is_safe_the_repeat_delete_answers_404(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Superseded")
    event = make_expiry("u1", "acct-1")
    handler = make_handler()
    _run(handler, event)
    _run(handler, event)
    assert [c.status for c in fake_array.calls()] == [200, 404]
    assert sink.kinds() == [
        K.CLEANUP_DELETED,
        K.CLEANUP_ROW_MARKED,
        K.CLEANUP_ALREADY_DELETED,
        K.CLEANUP_ROW_MARKED,
    ]
    assert sink.outcomes[-1].detail == "already_removed"
    # One final outcome per expiry: the replay's answer has the first one's identity (it replaces it).
    assert sink.outcomes[0].outcome_id == sink.outcomes[2].outcome_id


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_credential_parks_the_cleanup_and_touches_no_row(
    status: int,
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sink: ListSink,
    retry_queues: RetryQueues,
    sqs: Any,
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    fake_array.add_users(["acct-1"])
    fake_array.expire_credentials(status=status)
    put_row("u1", "acct-1", "Cancelled")
    event = make_expiry("u1", "acct-1", ItemKind.CANCELLATION)
    _run(make_handler(), event)
    assert fake_array.has_user("acct-1")
    assert sink.kinds() == [K.CLEANUP_PARKED]
    assert sink.outcomes[0].detail == str(status)
    assert (get_row("u1", "acct-1") or {})["status"] == "Cancelled"
    [parked] = _parked(sqs, retry_queues, drain_queue)
    assert parked["array_account_id"] == "acct-1"
    assert parked["source_event_id"] == event.event_id
    assert parked["attempt"] == 1
    assert parked["park_reason"] == str(status)


def test_after_one_credential_refusal_the_rest_of_the_batch_parks_without_calling_array(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    sink: ListSink,
) -> None:
    accounts = [f"acct-{i}" for i in range(20)]
    fake_array.add_users(accounts)
    put_rows([(f"u{i}", a, "Superseded") for i, a in enumerate(accounts)])
    fake_array.expire_credentials()
    _run(make_handler(concurrency=2), *(make_expiry(f"u{i}", a) for i, a in enumerate(accounts)))
    assert sink.kinds().count(K.CLEANUP_PARKED) == 20
    assert len(fake_array.calls()) <= 2  # only the calls already in flight when the first refusal came


def test_any_other_4xx_is_a_terminal_failure_recorded_and_not_parked(
    make_handler: Callable[..., CleanupHandler],
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sink: ListSink,
    retry_queues: RetryQueues,
    sqs: Any,
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    class Rejecting:
        def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
            raise ArrayRequestRejected(422)

    put_row("u1", "acct-1", "Superseded")
    _run(make_handler(array=Rejecting()), make_expiry("u1", "acct-1"))
    assert sink.kinds() == [K.CLEANUP_FAILED]
    assert sink.outcomes[0].detail == "422"
    assert (get_row("u1", "acct-1") or {})["status"] == "Superseded"
    assert _parked(sqs, retry_queues, drain_queue) == []


def test_transient_failures_past_the_budget_are_parked_not_lost(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
    retry_queues: RetryQueues,
    sqs: Any,
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    fake_array.add_users(["acct-1"])
    fake_array.set_faults(error_rate=1.0)
    put_row("u1", "acct-1", "Superseded")
    _run(make_handler(), make_expiry("u1", "acct-1"))
    assert len(fake_array.calls()) == 3  # ArraySettings.max_attempts
    assert sink.kinds() == [K.CLEANUP_PARKED]
    assert sink.outcomes[0].detail in {"500", "502", "503"}
    assert len(_parked(sqs, retry_queues, drain_queue)) == 1


def test_the_guard_refuses_to_delete_an_account_an_active_row_names(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sink: ListSink,
) -> None:
    # A reactivation whose delete of the cancellation record failed: the row is Active again and the
    # cancellation record, left behind, expires.
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Active")
    _run(make_handler(), make_expiry("u1", "acct-1", ItemKind.CANCELLATION))
    assert fake_array.calls_for("acct-1") == []
    assert fake_array.has_user("acct-1")
    assert sink.kinds() == [K.CLEANUP_REFUSED_BY_GUARD]
    assert sink.outcomes[0].kind in FINAL_CLEANUP_OUTCOMES
    assert (get_row("u1", "acct-1") or {})["status"] == "Active"


class _FailingQuery:
    """A DynamoDB client whose GSI1 query fails."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def query(self, **kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "boom"}}, "Query")

    def get_item(self, **kwargs: Any) -> Any:
        return self._inner.get_item(**kwargs)

    def update_item(self, **kwargs: Any) -> Any:
        return self._inner.update_item(**kwargs)


def test_an_unreadable_gsi1_fails_closed_parks_and_never_deletes(
    make_handler: Callable[..., CleanupHandler],
    dynamodb: Any,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sink: ListSink,
    retry_queues: RetryQueues,
    sqs: Any,
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    _run(make_handler(dynamodb=_FailingQuery(dynamodb)), make_expiry("u1", "acct-1", ItemKind.CANCELLATION))
    assert fake_array.calls() == []
    assert sink.kinds() == [K.CLEANUP_PARKED]
    assert sink.outcomes[0].detail == "guard:InternalServerError"
    assert (get_row("u1", "acct-1") or {})["status"] == "Cancelled"
    assert len(_parked(sqs, retry_queues, drain_queue)) == 1


class _RowChangesUnderfoot:
    """Between the guard's read and the mark, the row stops naming the account (a relink)."""

    def __init__(self, inner: Any, table: str) -> None:
        self._inner = inner
        self._table = table

    def query(self, **kwargs: Any) -> Any:
        page = self._inner.query(**kwargs)
        for item in page.get("Items", []):
            self._inner.update_item(
                TableName=self._table,
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET arrayAccountId = :other",
                ExpressionAttributeValues={":other": {"S": "acct-other"}},
            )
        return page

    def get_item(self, **kwargs: Any) -> Any:
        return self._inner.get_item(**kwargs)

    def update_item(self, **kwargs: Any) -> Any:
        return self._inner.update_item(**kwargs)


def test_the_mark_is_conditional_a_row_that_no_longer_names_the_account_is_left_and_recorded(
    make_handler: Callable[..., CleanupHandler],
    dynamodb: Any,
    table: str,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Superseded")
    _run(make_handler(dynamodb=_RowChangesUnderfoot(dynamodb, table)), make_expiry("u1", "acct-1"))
    assert sink.kinds() == [K.CLEANUP_DELETED, K.CLEANUP_MARK_FAILED]
    assert sink.outcomes[1].detail == "ConditionalCheckFailedException"
    row = get_row("u1", "acct-1") or {}
    assert row["status"] == "Superseded"
    assert row["arrayAccountId"] == "acct-other"


class _FailingUpdate(_FailingQuery):
    def query(self, **kwargs: Any) -> Any:
        return self._inner.query(**kwargs)

    def update_item(self, **kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "UpdateItem")


def test_a_failed_mark_is_recorded_the_row_left_as_it_was_and_not_retried_by_the_stream(
    make_handler: Callable[..., CleanupHandler],
    dynamodb: Any,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sink: ListSink,
    retry_queues: RetryQueues,
    sqs: Any,
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Superseded")
    handler = make_handler(dynamodb=_FailingUpdate(dynamodb))
    _run(handler, make_expiry("u1", "acct-1"))  # returns: the stream moves on
    assert fake_array.deleted_users() == ["acct-1"]
    assert sink.kinds() == [K.CLEANUP_DELETED, K.CLEANUP_MARK_FAILED]
    assert sink.outcomes[1].detail == "ProvisionedThroughputExceededException"
    assert (get_row("u1", "acct-1") or {})["status"] == "Superseded"
    assert _parked(sqs, retry_queues, drain_queue) == []
    handler.flush()
    assert len(fake_array.calls()) == 1  # nothing pending: the stream does not retry it


def test_a_deleted_account_with_no_row_records_the_mark_failure(
    make_handler: Callable[..., CleanupHandler], fake_array: FakeArrayServer, sink: ListSink
) -> None:
    fake_array.add_users(["acct-1"])
    _run(make_handler(), make_expiry("u1", "acct-1"))
    assert sink.kinds() == [K.CLEANUP_DELETED, K.CLEANUP_MARK_FAILED]
    assert sink.outcomes[1].detail == "row_not_found"


def test_an_expiry_without_its_old_image_is_rejected_and_nothing_is_done(
    make_handler: Callable[..., CleanupHandler], fake_array: FakeArrayServer, sink: ListSink
) -> None:
    handler = make_handler()
    with pytest.raises(RecordRejected):
        handler.add(msgspec.structs.replace(make_expiry("u1", "acct-1"), old_item=None))
    handler.flush()
    assert fake_array.calls() == []
    assert sink.outcomes == []


@pytest.mark.parametrize("account", ["", "   "])
def test_an_expiry_naming_an_empty_account_is_rejected_and_the_other_expiries_of_its_window_run(
    account: str,
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1", "acct-2", "acct-3"])
    put_rows([("u1", "acct-1", "Superseded"), ("u2", "acct-2", "Superseded"), ("u3", "acct-3", "Cancelled")])
    window = [
        make_expiry("u1", "acct-1"),
        make_expiry("u2", "acct-2"),
        make_expiry("u9", account),
        make_expiry("u3", "acct-3", ItemKind.CANCELLATION),
    ]
    handler = make_handler()
    rejected = []
    for event in window:  # as the consumer adds them: a rejection is that record's alone
        try:
            handler.add(event)
        except RecordRejected as error:
            rejected.append((event.event_id, error))
    handler.flush()
    assert [event_id for event_id, _ in rejected] == [window[2].event_id]
    assert sorted(fake_array.deleted_users()) == ["acct-1", "acct-2", "acct-3"]
    assert sink.kinds().count(K.CLEANUP_DELETED) == 3
    assert str(rejected[0][1]).startswith(
        "a cleanup expiry whose record has an empty or blank arrayAccountId"
    )


def test_a_ttl_removal_under_a_cleanup_key_whose_image_does_not_fit_is_rejected(
    make_handler: Callable[..., CleanupHandler], fake_array: FakeArrayServer
) -> None:
    expired = make_expiry("u1", "acct-1")
    unreadable = UnknownItemChanged(
        event_id=expired.event_id,
        change=ChangeKind.REMOVE,
        position=expired.position,
        created_at=expired.created_at,
        keys=expired.keys,
        item_kind=ItemKind.STALE,
        user_id="u1",
        ttl_deletion=True,
        old_item=UnknownItem(pk=expired.keys["pk"], sk=expired.keys["sk"]),
    )
    handler = make_handler()
    with pytest.raises(RecordRejected):
        handler.add(unreadable)
    handler.flush()
    assert fake_array.calls() == []


def test_outcomes_name_their_source_event_and_use_the_clock_passed_in(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Superseded")
    event = make_expiry("u1", "acct-1")
    _run(make_handler(), event)
    for outcome in sink.outcomes:
        assert outcome.occurred_at == NOW
        assert outcome.user_id == "u1"
        assert outcome.array_account_id == "acct-1"
        assert outcome.source_event_id == event.event_id
        assert outcome.source_shard_id == event.position.shard_id
        assert outcome.source_sequence_number == event.position.sequence_number
        assert outcome.attempt == 0
    assert len({o.outcome_id for o in sink.outcomes}) == len(sink.outcomes)


def test_cleanups_in_a_batch_run_concurrently_within_the_bound(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    sink: ListSink,
) -> None:
    accounts = [f"acct-{i}" for i in range(24)]
    fake_array.add_users(accounts)
    put_rows([(f"u{i}", a, "Superseded") for i, a in enumerate(accounts)])
    fake_array.set_faults(latency_seconds=0.1)
    _run(make_handler(concurrency=3), *(make_expiry(f"u{i}", a) for i, a in enumerate(accounts)))
    assert sorted(fake_array.deleted_users()) == sorted(accounts)
    assert 1 < fake_array.max_in_flight <= 3


class _SqsDown:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.down = threading.Event()
        self.down.set()

    def send_message_batch(self, **kwargs: Any) -> Any:
        if self.down.is_set():
            raise ClientError({"Error": {"Code": "ServiceUnavailable"}}, "SendMessageBatch")
        return self.inner.send_message_batch(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_work_that_cannot_be_parked_stays_pending_and_flush_raises_retryable(
    make_handler: Callable[..., CleanupHandler],
    sqs: Any,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    sink: ListSink,
    retry_queues: RetryQueues,
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    class FailsOnce:
        """Array is unavailable for acct-down the first time only."""

        def __init__(self) -> None:
            self.failed = False

        def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
            if array_user_id == "acct-down" and not self.failed:
                self.failed = True
                raise ArrayTransientError("503")
            array_client.delete_user(array_user_id, deadline=deadline)

    fake_array.add_users(["acct-ok", "acct-down"])
    put_rows([("u1", "acct-ok", "Superseded"), ("u2", "acct-down", "Superseded")])
    flaky = _SqsDown(sqs)
    handler = make_handler(sqs=flaky, array=FailsOnce())
    handler.add(make_expiry("u1", "acct-ok"))
    handler.add(make_expiry("u2", "acct-down"))
    with pytest.raises(RetryQueueError) as raised:
        handler.flush()
    assert not raised.value.park_now  # SQS answered (a refusal): the consumer's retry may succeed
    assert handler.stats.park_failures == 1
    assert fake_array.deleted_users() == ["acct-ok"]
    flaky.down.clear()
    handler.flush()  # the consumer's retry: only the unparked work runs again
    assert [c.user_id for c in fake_array.calls()] == ["acct-ok", "acct-down"]
    assert sorted(fake_array.deleted_users()) == ["acct-down", "acct-ok"]
    assert drain_queue(retry_queues.queue_url) == []
    assert sink.kinds("acct-ok") == [K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED]
    assert sink.kinds("acct-down") == [K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED]


def test_discard_pending_forgets_unflushed_work(
    make_handler: Callable[..., CleanupHandler], fake_array: FakeArrayServer
) -> None:
    handler = make_handler()
    handler.add(make_expiry("u1", "acct-1"))
    handler.discard_pending()
    handler.flush()
    assert fake_array.calls() == []


def test_each_flush_is_recorded_with_its_timestamps(
    make_handler: Callable[..., CleanupHandler], fake_array: FakeArrayServer
) -> None:
    handler = make_handler()
    _run(handler, make_expiry("u1", "acct-1"), make_expiry("u2", "acct-2"))
    [timing] = handler.flush_timings
    assert timing.cleanups == 2
    assert timing.finished >= timing.started


# -- every call of a flush inside its budget --------------------------------------------------------


class _Hung:
    """A client whose `hung` calls go to a server that never answers, the others to `inner`."""

    def __init__(self, inner: Any, silent: Any, *hung: str) -> None:
        self._inner = inner
        self._silent = silent
        self._hung = frozenset(hung)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._silent if name in self._hung else self._inner, name)


@pytest.mark.timeout(60)
def test_a_hung_gsi1_read_parks_the_work_within_the_budget_and_never_deletes(
    make_handler: Callable[..., CleanupHandler],
    dynamodb: Any,
    hung_client: Callable[..., Any],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
    retry_queues: RetryQueues,
    sqs: Any,
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    # The read timeout is far past the budget: the flush's own deadline is what bounds it.
    table = _Hung(dynamodb, hung_client("dynamodb", read_timeout=120), "query")
    handler = make_handler(dynamodb=table, retry_budget_seconds=2.0)
    _run(handler, make_expiry("u1", "acct-1", ItemKind.CANCELLATION))
    assert fake_array.calls() == []
    assert sink.kinds() == [K.CLEANUP_PARKED]
    assert sink.outcomes[0].detail == "guard:deadline"
    [parked] = _parked(sqs, retry_queues, drain_queue)
    assert parked["park_reason"] == "guard:deadline"


@pytest.mark.timeout(60)
def test_a_hung_mark_after_the_delete_finishes_the_cleanup_and_parks_it_for_the_mark_alone(
    make_handler: Callable[..., CleanupHandler],
    dynamodb: Any,
    hung_client: Callable[..., Any],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
    retry_queues: RetryQueues,
    sqs: Any,
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Superseded")
    table = _Hung(dynamodb, hung_client("dynamodb", read_timeout=120), "update_item")
    _run(make_handler(dynamodb=table, retry_budget_seconds=2.0), make_expiry("u1", "acct-1"))
    assert fake_array.deleted_users() == ["acct-1"]
    # A slow mark is not a failed one: no `mark_failed`, the retry's mark answers for it.
    assert sink.kinds() == [K.CLEANUP_DELETED, K.CLEANUP_PARKED]
    assert sink.outcomes[1].detail == "mark:deadline"
    # The delete is finished; the mark is not: parked with the final note, so a retry only marks.
    [parked] = _parked(sqs, retry_queues, drain_queue)
    assert (parked["park_reason"], parked["final_state"], parked["delete_sent"]) == (
        "mark:deadline",
        "deleted",
        True,
    )


@pytest.mark.timeout(60)
def test_a_retry_queue_send_that_times_out_counts_as_sent_and_parks_nothing_locally(
    make_handler: Callable[..., CleanupHandler],
    hung_client: Callable[..., Any],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1"])
    fake_array.expire_credentials()  # the delete is refused: the work must be parked
    put_row("u1", "acct-1", "Superseded")
    handler = make_handler(sqs=hung_client("sqs", read_timeout=120), retry_budget_seconds=2.0)
    handler.add(make_expiry("u1", "acct-1"))
    handler.flush()  # no RetryQueueError: the consumer parks nothing (SQS is at-least-once anyway)
    assert (handler.stats.park_unconfirmed, handler.stats.park_failures) == (1, 0)
    assert sink.kinds() == [K.CLEANUP_PARKED]


def test_a_retry_queue_read_timeout_counts_as_sent(
    make_handler: Callable[..., CleanupHandler],
    sqs: Any,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
) -> None:
    class TimesOut:
        def __getattr__(self, name: str) -> Any:
            return getattr(sqs, name)

        def send_message_batch(self, **kwargs: Any) -> Any:
            raise ReadTimeoutError(endpoint_url="http://127.0.0.1:1")

    fake_array.add_users(["acct-1"])
    fake_array.expire_credentials()
    put_row("u1", "acct-1", "Superseded")
    handler = make_handler(sqs=TimesOut())
    _run(handler, make_expiry("u1", "acct-1"))
    assert (handler.stats.park_unconfirmed, sink.kinds()) == (1, [K.CLEANUP_PARKED])


@pytest.mark.timeout(60)
def test_a_send_counted_as_sent_that_then_fails_is_sent_again_by_the_next_flush(
    make_handler: Callable[..., CleanupHandler],
    sqs: Any,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    retry_queues: RetryQueues,
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    release = threading.Event()

    class SlowThenRefuses:
        """The first send hangs past the flush's budget, then fails for certain; later sends go on."""

        def __init__(self) -> None:
            self.sends = 0

        def __getattr__(self, name: str) -> Any:
            return getattr(sqs, name)

        def send_message_batch(self, **kwargs: Any) -> Any:
            self.sends += 1
            if self.sends == 1:
                release.wait(30)
                raise ClientError({"Error": {"Code": "InternalError"}}, "SendMessageBatch")
            return sqs.send_message_batch(**kwargs)

    fake_array.add_users(["acct-1"])
    fake_array.expire_credentials()
    put_row("u1", "acct-1", "Superseded")
    handler = make_handler(sqs=SlowThenRefuses(), retry_budget_seconds=1.0)
    _run(handler, make_expiry("u1", "acct-1"))
    assert drain_queue(retry_queues.queue_url) == []
    release.set()
    deadline = threading.Event()
    for _ in range(100):  # the late failure is seen on the sender's thread
        if handler.stats.park_unconfirmed and handler._resend:
            break
        deadline.wait(0.05)
    deadline.wait(1.1)  # the queue's quiet period (one budget) passes
    handler.flush()  # the next flush, with nothing of its own
    [message] = drain_queue(retry_queues.queue_url)
    assert json.loads(message["Body"])["array_account_id"] == "acct-1"
    assert handler.stats.park_resent == 1


@pytest.mark.timeout(60)
def test_after_the_retry_queue_did_not_answer_the_next_flush_raises_at_once_and_calls_nobody(
    make_handler: Callable[..., CleanupHandler],
    hung_client: Callable[..., Any],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
) -> None:
    fake_array.add_users(["acct-1", "acct-2"])
    fake_array.expire_credentials()
    put_row("u1", "acct-1", "Superseded")
    put_row("u2", "acct-2", "Superseded")
    handler = make_handler(sqs=hung_client("sqs", read_timeout=120), retry_budget_seconds=2.0)
    _run(handler, make_expiry("u1", "acct-1"))  # its send timed out: counted as sent
    calls = len(fake_array.calls())
    handler.add(make_expiry("u2", "acct-2"))
    with pytest.raises(RetryQueueError) as raised:
        handler.flush()  # a later flush (the next window's, or a replay's)
    assert len(fake_array.calls()) == calls
    assert raised.value.park_now


def test_the_guard_reads_gsi1_before_the_delete(
    make_handler: Callable[..., CleanupHandler],
    dynamodb: Any,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
) -> None:
    calls: list[str] = []

    class Table:
        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(dynamodb, name)

    class Array:
        def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
            calls.append("delete_user")
            array_client.delete_user(array_user_id, deadline=deadline)

    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    _run(make_handler(dynamodb=Table(), array=Array()), make_expiry("u1", "acct-1", ItemKind.CANCELLATION))
    assert calls == ["query", "delete_user", "update_item"]


def test_a_replay_after_a_crash_lost_the_deletes_outcome_reports_it_without_a_second_delete(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    tmp_path: Path,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Superseded")
    event = make_expiry("u1", "acct-1")
    lost = ListSink()  # the first process's outcomes never reach the lake: it is killed before its flush
    _run(make_handler(sink=lost, deletion_notes=LocalDeletionNotes(tmp_path / "notes")), event)
    replay = ListSink()
    _run(make_handler(sink=replay, deletion_notes=LocalDeletionNotes(tmp_path / "notes")), event)
    assert [c.status for c in fake_array.calls()] == [200]  # the replay found the final note
    [final] = [o for o in replay.outcomes if o.kind in FINAL_CLEANUP_OUTCOMES]
    assert (final.kind, final.detail) == (K.CLEANUP_DELETED, None)
    assert final.outcome_id == lost.outcomes[0].outcome_id


def test_an_expiry_replayed_after_the_lake_failed_makes_no_second_delete(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    tmp_path: Path,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Superseded")
    event = make_expiry("u1", "acct-1")
    sink = ListSink()
    handler = make_handler(
        sink=sink, deletion_notes=LocalDeletionNotes(tmp_path / "notes"), retry_budget_seconds=20.0
    )
    _run(handler, event)
    first = list(sink.outcomes)
    sink.outcomes.clear()  # the lake failed: its buffer is discarded and the consumer replays the window
    handler.discard_pending()
    _run(handler, event)
    assert [c.status for c in fake_array.calls()] == [200]
    assert [(o.outcome_id, o.kind) for o in sink.outcomes] == [(o.outcome_id, o.kind) for o in first]


class _SqsRefuses:
    """The retry queue takes every entry but those naming `account` (a per-entry refusal)."""

    def __init__(self, inner: Any, account: str) -> None:
        self.inner = inner
        self.account = account

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> Any:
        taken = [entry for entry in Entries if self.account not in entry["MessageBody"]]
        if taken:
            self.inner.send_message_batch(QueueUrl=QueueUrl, Entries=taken)
        refused = [entry for entry in Entries if entry not in taken]
        return {"Failed": [{"Id": entry["Id"], "Code": "Refused"} for entry in refused]}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _position(event: StreamEvent) -> tuple[str, str]:
    return (event.position.shard_id, event.position.sequence_number)


def test_a_flush_that_cannot_park_names_every_expiry_it_deleted_as_finished(
    make_handler: Callable[..., CleanupHandler],
    sqs: Any,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
) -> None:
    fake_array.add_users(["acct-ok", "acct-down"])
    put_rows([("u1", "acct-ok", "Superseded"), ("u2", "acct-down", "Superseded")])
    handler = make_handler(sqs=_SqsDown(sqs), array=_FailsFor("acct-down", array_client))
    deleted, unparked = make_expiry("u1", "acct-ok"), make_expiry("u2", "acct-down")
    handler.add(deleted)
    handler.add(unparked)
    with pytest.raises(RetryQueueError) as raised:
        handler.flush()
    assert raised.value.finished == {_position(deleted)}


def test_work_the_retry_queue_took_is_named_finished_and_only_the_refused_work_is_not(
    make_handler: Callable[..., CleanupHandler],
    sqs: Any,
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
) -> None:
    put_rows([("u1", "acct-1", "Superseded"), ("u2", "acct-2", "Superseded")])
    fake_array.expire_credentials()  # every delete refused: both are parked in the retry queue
    handler = make_handler(sqs=_SqsRefuses(sqs, "acct-2"))
    taken, refused = make_expiry("u1", "acct-1"), make_expiry("u2", "acct-2")
    handler.add(taken)
    handler.add(refused)
    with pytest.raises(RetryQueueError) as raised:
        handler.flush()
    assert raised.value.finished == {_position(taken)}


def test_an_event_that_asks_for_no_cleanup_is_named_finished_when_a_flush_fails(
    make_handler: Callable[..., CleanupHandler],
    sqs: Any,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
) -> None:
    put_row("u1", "acct-1", "Superseded")
    fake_array.expire_credentials()
    handler = make_handler(sqs=_SqsDown(sqs))
    [other] = _other_events("u2", "acct-2")[2:3]
    handler.add(other)
    handler.add(make_expiry("u1", "acct-1"))
    with pytest.raises(RetryQueueError) as raised:
        handler.flush()
    assert raised.value.finished == {_position(other)}


def test_a_failing_flush_names_nothing_finished_before_its_last_success(
    make_handler: Callable[..., CleanupHandler],
    sqs: Any,
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
) -> None:
    fake_array.add_users(["acct-1"])
    put_rows([("u1", "acct-1", "Superseded"), ("u2", "acct-2", "Superseded")])
    flaky = _SqsDown(sqs)
    flaky.down.clear()
    handler = make_handler(sqs=flaky)
    _run(handler, make_expiry("u1", "acct-1"))  # a successful flush: a window of its own, committed
    flaky.down.set()
    fake_array.expire_credentials()
    handler.add(make_expiry("u2", "acct-2"))
    with pytest.raises(RetryQueueError) as raised:
        handler.flush()
    assert raised.value.finished == frozenset()


class _FailsFor:
    """Array unavailable for one account; the others go to the real fake Array."""

    def __init__(self, account: str, inner: HttpArrayClient) -> None:
        self.account = account
        self.inner = inner

    def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
        if array_user_id == self.account:
            raise ArrayTransientError("503")
        self.inner.delete_user(array_user_id, deadline=deadline)

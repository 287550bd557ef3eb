"""The cleanup handler on lanes (pipeline.lanes): a slow account delays neither the others' outcomes nor
the records after it, only the checkpoint; one item's expiries run in stream order; a parked cleanup holds
its item's later expiries; a slow cleanup is still given up at its own batch's deadline."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters import HttpArrayClient
from config import ArraySettings
from devstack.fake_array import DELETE_USER, FakeArrayServer
from pipeline.dead_letter import DeadLetters
from pipeline.decode import decode_record
from pipeline.handlers import HandlerRegistry
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from pipeline.shard_consumer import CommitPolicy, HandlerRetryPolicy, ShardConsumer
from processors.cleanup import CleanupHandler, RetryQueues
from processors.cleanup._valve import DeleteValve
from schema.outcomes import OutcomeKind
from tests.processors.cleanup.cleanup_helpers import ListSink, expiry_record, make_expiry

K = OutcomeKind
SLOW_AFTER = 0.3
SHARD = "shardId-00000001700000000000-cccccccc"


@pytest.fixture
def patient_client(fake_array: FakeArrayServer) -> Iterator[HttpArrayClient]:
    """An Array client that waits out a held call (the slow account) instead of timing out."""
    settings = ArraySettings(base_url=fake_array.url, timeout_seconds=8.0, max_attempts=1, concurrency=4)
    client = HttpArrayClient(settings, backoff_base_seconds=0.01, backoff_max_seconds=0.05)
    try:
        yield client
    finally:
        client.close()


def _wait_until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    stop_at = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < stop_at, "the condition never held"
        time.sleep(0.01)


def test_a_slow_account_does_not_delay_the_others_outcomes(
    make_handler: Callable[..., CleanupHandler],
    patient_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    sink: ListSink,
) -> None:
    accounts = ["acct-slow", *(f"acct-{i}" for i in range(8))]
    fake_array.add_users(accounts)
    put_rows([(f"u{i}", a, "Superseded") for i, a in enumerate(accounts)])
    fake_array.hold(DELETE_USER, until="slow-answers", key="acct-slow")
    handler = make_handler(
        array=patient_client, concurrency=4, retry_budget_seconds=10.0, slow_after_seconds=SLOW_AFTER
    )
    expiries = [make_expiry(f"u{i}", a) for i, a in enumerate(accounts)]
    for event in expiries:
        handler.add(event)
    handler.flush()
    # The flush returned with the other eight finished, while the slow account's delete is still held.
    assert sink.kinds().count(K.CLEANUP_DELETED) == 8
    assert K.CLEANUP_DELETED not in sink.kinds("acct-slow")
    slow = expiries[0].position
    assert handler.running() == {(slow.shard_id, slow.sequence_number)}
    assert fake_array.has_user("acct-slow")
    fake_array.hooks.set("slow-answers")
    _wait_until(lambda: not fake_array.has_user("acct-slow"))
    handler.flush()  # the next flush collects it
    assert sink.kinds("acct-slow") == [K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED]
    assert handler.running() == frozenset()


def test_one_items_expiries_run_in_stream_order_the_later_one_waits_for_the_earlier(
    make_handler: Callable[..., CleanupHandler],
    patient_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1", "acct-2"])
    put_rows([("u1", "acct-1", "Superseded"), ("u2", "acct-2", "Superseded")])
    fake_array.hold(DELETE_USER, until="first-answers", key="acct-1")
    handler = make_handler(
        array=patient_client, concurrency=4, retry_budget_seconds=10.0, slow_after_seconds=SLOW_AFTER
    )
    # Two expiries of one item (the same stale record, scheduled and expired twice) and another item.
    first, second, other = (
        make_expiry("u1", "acct-1"),
        make_expiry("u1", "acct-1"),
        make_expiry("u2", "acct-2"),
    )
    for event in (first, second, other):
        handler.add(event)
    handler.flush()
    assert sink.kinds("acct-2") == [K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED]
    # The item's later expiry has not called Array: it waits behind the earlier one.
    assert len(fake_array.calls_for("acct-1")) == 0
    assert {p[1] for p in handler.running()} == {
        first.position.sequence_number,
        second.position.sequence_number,
    }
    fake_array.hooks.set("first-answers")
    _wait_until(lambda: len(fake_array.calls_for("acct-1")) == 2)
    handler.flush()
    by_event = {
        event.event_id: [o.kind for o in sink.outcomes if o.source_event_id == event.event_id]
        for event in (first, second)
    }
    assert by_event[first.event_id][0] is K.CLEANUP_DELETED  # the earlier one deleted it
    assert by_event[second.event_id][0] is K.CLEANUP_ALREADY_DELETED  # the later one came after
    assert [c.status for c in fake_array.calls_for("acct-1")] == [200, 404]


def test_a_parked_cleanup_holds_its_items_later_expiry_which_is_parked_behind_it_uncalled(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    retry_queues: RetryQueues,
    drain_queue: Callable[[str], list[dict[str, Any]]],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1", "acct-2"])
    put_rows([("u1", "acct-1", "Superseded"), ("u2", "acct-2", "Superseded")])
    # One lane and one delete an hour: the other item takes the delete, then the item's first expiry
    # parks for the hour's budget, and its second must not run before it.
    handler = make_handler(concurrency=1, valve=DeleteValve(budget_per_hour=1))
    other, first, second = (
        make_expiry("u2", "acct-2"),
        make_expiry("u1", "acct-1"),
        make_expiry("u1", "acct-1"),
    )
    for event in (other, first, second):
        handler.add(event)
    handler.flush()
    assert sink.kinds("acct-2") == [K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED]
    parked = {body["source_event_id"]: body["park_reason"] for body in _bodies(drain_queue, retry_queues)}
    assert parked == {first.event_id: "delete_budget", second.event_id: "held"}
    assert fake_array.calls_for("acct-1") == []
    assert handler.running() == frozenset()


def test_a_slow_cleanup_left_running_is_given_up_at_its_batchs_deadline_by_a_later_flush(
    make_handler: Callable[..., CleanupHandler],
    patient_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    retry_queues: RetryQueues,
    drain_queue: Callable[[str], list[dict[str, Any]]],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-slow", "acct-1"])
    put_rows([("u0", "acct-slow", "Superseded"), ("u1", "acct-1", "Superseded")])
    fake_array.hold(DELETE_USER, until="never-within-this-test", key="acct-slow")
    handler = make_handler(
        array=patient_client, concurrency=2, retry_budget_seconds=2.0, slow_after_seconds=SLOW_AFTER
    )
    slow, quick = make_expiry("u0", "acct-slow"), make_expiry("u1", "acct-1")
    handler.add(slow)
    handler.add(quick)
    handler.flush()
    assert sink.kinds("acct-1") == [K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED]
    assert handler.running() == {(slow.position.shard_id, slow.position.sequence_number)}
    handler.flush()  # waits no longer than the slow one's own deadline, then parks it
    assert handler.running() == frozenset()
    [body] = _bodies(drain_queue, retry_queues)
    assert body["source_event_id"] == slow.event_id
    # Whichever comes first within its batch's budget: the client's timeout, cut to the batch's Array
    # deadline (the request reached Array unanswered), or the flush giving up on the attempt.
    assert body["park_reason"] in ("timeout", "array:deadline")
    assert sink.kinds("acct-slow") == [K.CLEANUP_PARKED]
    fake_array.hooks.set("never-within-this-test")


def _bodies(drain: Callable[[str], list[dict[str, Any]]], queues: RetryQueues) -> list[dict[str, Any]]:
    return [json.loads(m["Body"]) for m in drain(queues.queue_url)]


def _consumer(root: Path, handler: CleanupHandler) -> ShardConsumer:
    registry = HandlerRegistry()
    registry.register(handler)
    consumer = ShardConsumer(
        stream_arn="arn:aws:dynamodb:eu-west-1:000000000000:table/entitlements/stream/2026-01-01T00:00:00.000",
        handlers=registry,
        decode=decode_record,
        quarantine=Quarantine(root / "quarantine"),
        parked=ParkedWork(root / "parked"),
        dead_letters=DeadLetters(root / "dead"),
        commit=CommitPolicy(every_records=10_000, interval_seconds=3600),
        retry=HandlerRetryPolicy(attempts=2, max_seconds=5, initial_wait=0.01, max_wait=0.02),
    )
    consumer.start(SHARD)
    return consumer


def test_through_the_consumer_the_checkpoint_stays_below_a_slow_cleanup_until_it_finished(
    tmp_path: Path,
    make_handler: Callable[..., CleanupHandler],
    patient_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    sink: ListSink,
) -> None:
    accounts = ["acct-0", "acct-slow", "acct-2", "acct-3"]
    fake_array.add_users(accounts)
    put_rows([(f"u{i}", a, "Superseded") for i, a in enumerate(accounts)])
    fake_array.hold(DELETE_USER, until="slow-answers", key="acct-slow")
    handler = make_handler(
        array=patient_client, concurrency=4, retry_budget_seconds=10.0, slow_after_seconds=SLOW_AFTER
    )
    consumer = _consumer(tmp_path, handler)
    checkpoints: list[str | None] = []
    window = [
        RawRecord(
            expiry_record(f"u{i}", a, event_id=f"event-{i}", sequence_number=str(700 + i)), str(700 + i)
        )
        for i, a in enumerate(accounts)
    ]
    consumer.process(window, checkpoints.append)
    consumer.commit(checkpoints.append)
    assert sink.kinds().count(K.CLEANUP_DELETED) == 3
    assert checkpoints == ["700"]  # below the slow one (701), never past it
    assert list(ParkedWork(tmp_path / "parked")) == []
    fake_array.hooks.set("slow-answers")
    consumer.commit(checkpoints.append, settle=True)
    assert sink.kinds("acct-slow") == [K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED]
    assert checkpoints == ["700", "703"]

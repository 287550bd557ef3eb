"""The fault test: 1,000 expiries while the fake Array fails 30% of calls (5xx or timeouts) and expires its
credentials once. Every account ends deleted once the retry worker has drained, nothing is lost, and no
account of an Active row is touched. Each batch is flushed as the shard consumer flushes it: when the retry
queue cannot take the parked work within the budget (moto on a loaded machine), a refusal is retried and a
`park_now` parks the records, which `replay-parked` runs again. How long a flush may hold the shard is
bounded by construction and specified by the handler's hung-dependency tests.

The budget (3 s, half of it kept back from Array for parking) is sized from what parking costs here:
the local stack's SQS send costs what it sends whatever the queue's depth, as in SQS
(`devstack._moto_patches.install_sqs_send_cost`), and parking a whole batch of 100 takes ~0.04 s on one
loaded core, against the 1.1 s the budget leaves it. (moto alone costs a send the depth of the queue:
the retry queue fills here faster than its worker drains, and parking reached 0.9 s a batch at 500
messages deep, so on a loaded machine every flush missed its budget.) The credentials expire for a
number of calls, not of seconds, so the fault bites as much however fast the machine is."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from adapters import HttpArrayClient
from config import ArraySettings
from devstack.fake_array import FakeArrayServer, FaultPlan
from pipeline.events import CleanupExpired
from processors.cleanup import CleanupHandler, RetryQueues
from processors.cleanup._errors import RetryQueueError
from processors.cleanup.retry_worker import RetryWorker
from schema.outcomes import OutcomeKind
from schema.table import ItemKind
from tests.processors.cleanup.cleanup_helpers import FixedClock, ListSink, make_expiry

K = OutcomeKind
EXPIRIES = 1_000
GUARDED = 40  # of those, cancellation records left behind by a failed reactivation: the row is Active
BATCH = 100
BUDGET = 3.0


def _flush_as_the_consumer_does(handler: CleanupHandler, batch: list[CleanupExpired]) -> None:
    """Flush; a `RetryQueueError` is retried (work already finished is not redone), and one that says
    `park_now` parks the batch: the pending work is discarded and the replay adds the same expiries
    again once the retry queue's quiet period (one budget) is over."""
    for _ in range(20):
        try:
            handler.flush()
            return
        except RetryQueueError as failed:
            if failed.park_now:
                handler.discard_pending()
                time.sleep(BUDGET)  # replay-parked runs later, not at once
                for event in batch:
                    handler.add(event)
    raise AssertionError("a batch never flushed")


def test_a_thousand_expiries_under_array_faults_all_end_deleted_and_nothing_is_lost(
    dynamodb: Any,
    sqs: Any,
    table: str,
    retry_queues: RetryQueues,
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    drain_queue: Callable[[str], list[dict[str, Any]]],
) -> None:
    users = [f"user-{i:04d}" for i in range(EXPIRIES)]
    accounts = [f"acct-{i:04d}" for i in range(EXPIRIES)]
    guarded = set(accounts[:: EXPIRIES // GUARDED])
    deletable = [a for a in accounts if a not in guarded]
    status = {
        a: "Active" if a in guarded else ("Cancelled" if i % 2 else "Superseded")
        for i, a in enumerate(accounts)
    }
    put_rows([(u, a, status[a]) for u, a in zip(users, accounts, strict=True)])
    fake_array.add_users(accounts)
    fake_array.set_faults(FaultPlan(error_rate=0.15, timeout_rate=0.15, hang_seconds=0.4))

    settings = ArraySettings(
        base_url=fake_array.url,
        timeout_seconds=0.15,
        max_attempts=4,
        retry_budget_seconds=BUDGET,
        concurrency=8,
    )
    sink, clock = ListSink(), FixedClock()
    with HttpArrayClient(settings, backoff_base_seconds=0.02, backoff_max_seconds=0.2) as array:
        handler = CleanupHandler(
            dynamodb=dynamodb,
            sqs=sqs,
            array=array,
            table_name=table,
            retry_queue_url=retry_queues.queue_url,
            sink=sink,
            clock=clock,
            concurrency=settings.concurrency,
            retry_budget_seconds=settings.retry_budget_seconds,
            # Half the budget kept back from Array for parking (see the module docstring).
            park_reserve_seconds=BUDGET / 2,
        )

        def retry_worker(concurrency: int) -> RetryWorker:
            return RetryWorker(
                sqs=sqs,
                dynamodb=dynamodb,
                array=array,
                table_name=table,
                queue_url=retry_queues.queue_url,
                sink=sink,
                clock=clock,
                concurrency=concurrency,
                messages_per_pass=concurrency * 3,
                retry_budget_seconds=5.0,  # the worker holds no shard: a longer budget is fine
                repark_base_delay_seconds=0,
                wait_time_seconds=0,
            )

        events = [
            make_expiry(u, a, ItemKind.CANCELLATION if status[a] != "Superseded" else ItemKind.STALE)
            for u, a in zip(users, accounts, strict=True)
        ]
        # The retry worker runs beside the consumer, as it does in production.
        stop = threading.Event()
        background = threading.Thread(target=retry_worker(4).run_forever, args=(stop,), daemon=True)
        background.start()
        try:
            for number, start in enumerate(range(0, EXPIRIES, BATCH)):
                if number == 3:
                    # Once, mid-run: the next three calls are refused (the first of a flush parks
                    # the rest of its batch, so a batch or a few park whole, whatever the speed).
                    fake_array.expire_credentials(calls=3)
                batch = events[start : start + BATCH]
                for event in batch:
                    handler.add(event)
                _flush_as_the_consumer_does(handler, batch)
        finally:
            stop.set()
            background.join()
        assert sink.of_kind(K.CLEANUP_PARKED)  # the faults did bite
        report = retry_worker(16).drain(max_seconds=300)

    # Every account ends deleted; none of an Active row was touched.
    assert report.empty
    assert fake_array.call_count(fault="credentials") > 0  # the expiry window did refuse calls
    remaining = fake_array.users()
    assert remaining == guarded
    for account in guarded:
        assert fake_array.calls_for(account) == []
    deleted = fake_array.deleted_users()
    assert sorted(deleted) == sorted(deletable)  # each deleted exactly once

    # Nothing lost: every expiry reached a final outcome, every row is in its final state.
    by_event: dict[str, set[OutcomeKind]] = defaultdict(set)
    for outcome in sink.outcomes:
        assert outcome.source_event_id is not None
        by_event[outcome.source_event_id].add(outcome.kind)
    assert len(by_event) == EXPIRIES
    for event in events:
        kinds = by_event[event.event_id]
        account = event.old_item.arrayAccountId if event.old_item else ""
        if account in guarded:
            assert K.CLEANUP_REFUSED_BY_GUARD in kinds  # possibly after a park (the budget ran out first)
            assert not kinds & {K.CLEANUP_DELETED, K.CLEANUP_ALREADY_DELETED, K.CLEANUP_ROW_MARKED}
        else:
            assert kinds & {K.CLEANUP_DELETED, K.CLEANUP_ALREADY_DELETED}
            assert K.CLEANUP_ROW_MARKED in kinds
            assert K.CLEANUP_FAILED not in kinds
    for user, account in zip(users, accounts, strict=True):
        row = get_row(user, account) or {}
        assert row["status"] == ("Active" if account in guarded else "Removed")
    assert drain_queue(retry_queues.queue_url) == []
    assert drain_queue(retry_queues.dlq_url) == []
    # An id recorded twice is one outcome recorded again (a final outcome's id is per expiry: a retry that
    # finds its final note records it again, and the lake keeps one); never two outcomes under one id.
    under_id: dict[str, set[tuple[str, str | None]]] = defaultdict(set)
    for o in sink.outcomes:
        under_id[o.outcome_id].add((o.kind.value, o.detail))
    assert {i: kinds for i, kinds in under_id.items() if len(kinds) > 1} == {}

    # Every flush returned and took its whole batch.
    timings = handler.flush_timings
    assert len(timings) == EXPIRIES // BATCH
    assert sum(t.cleanups for t in timings) == EXPIRIES

"""Crash and failover through the real daemon: nothing in the stream is missed, replays keep their ids.

The crash tests' load holds TTL expiries as well as plain writes: the real child runs its cleanup handler
against the fake Array (the TTL emulator expires the cancellation records), and the kill lands while
cleanups are under way. What the lake shows afterwards, read through the project's views, is the
specification: every stream event once, and one final outcome per expiry, `deleted` wherever Array's log
shows this processor's delete.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from devstack import _writes as writes
from devstack.moto_server import MotoServer
from devstack.ttl_emulator import TTL_IDENTITY
from processors.cleanup import DrainReport
from schema.outcomes import FINAL_CLEANUP_OUTCOMES, OutcomeKind
from schema.table import EntitlementStatus
from tests.support.kcl import (
    CleanupStack,
    RunningConsumer,
    cleanup_stack,
    dynamodb,
    python_children,
    running_consumer,
    stream_contents,
)
from tests.support.lake import query_lake

pytestmark = pytest.mark.kcl

WRITES = 300
EXPIRIES = 60  # one every fifth write, from the first
KILL_AFTER_DELETES = 5  # Array deletes seen before the kill: the crash lands among cleanups


def put_load_row(table: Any, table_name: str, i: int) -> None:
    table.put_item(
        TableName=table_name,
        Item={
            "pk": {"S": f"USER#load-{i}"},
            "sk": {"S": "ENTITLEMENT#acct"},
            "userId": {"S": f"load-{i}"},
            "arrayAccountId": {"S": "acct"},
            "status": {"S": "Active"},
        },
    )


def write_steadily(
    endpoint: str, table_name: str, count: int, per_second: float, *, first: int = 0
) -> threading.Thread:
    """`count` rows numbered from `first`. Each call writes rows no earlier call wrote: a put that changes
    nothing writes no stream record (AWS, and the local stack's stream fidelity)."""

    def run() -> None:
        table = dynamodb(endpoint)
        for i in range(first, first + count):
            put_load_row(table, table_name, i)
            time.sleep(1 / per_second)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def write_steadily_with_expiries(stack: CleanupStack, count: int, per_second: float) -> threading.Thread:
    """`count` plain writes; before every fifth, `EXPIRIES` times, a signup (its account known to Array)
    cancelled at once with a TTL a second ahead, so that its cancellation record expires during the load."""

    def run() -> None:
        table = dynamodb(stack.endpoint)
        expiring = 0
        for i in range(count):
            if i % 5 == 0 and expiring < EXPIRIES:
                user, account = f"expiring-{i}", f"acct-expiring-{i}"
                now = datetime.now(UTC)
                stack.array.add_users([account])
                row = writes.entitlement_row(
                    user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=now
                )
                table.put_item(**writes.signup_put(stack.table, row))
                ttl = {"N": str(int(now.timestamp()) + 1)}
                table.transact_write_items(
                    TransactItems=writes.cancellation_transaction(
                        stack.table, user, account, ttl=ttl, now=now
                    )
                )
                expiring += 1
            put_load_row(table, stack.table, i)
            time.sleep(1 / per_second)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def start_load_until_cleanups_run(stack: CleanupStack) -> threading.Thread:
    """Wait until the daemon delivers, then write steadily with expiries; return once Array has deleted
    `KILL_AFTER_DELETES` accounts, so that a kill now lands in the middle of the load and its cleanups."""
    write_steadily(stack.endpoint, stack.table, 1, per_second=100, first=WRITES).join()
    stack.consumer.wait_for(lambda evs: len(evs) >= 1)
    writer = write_steadily_with_expiries(stack, WRITES, per_second=30)
    deadline = time.monotonic() + 120
    while len(stack.array.deleted_users()) < KILL_AFTER_DELETES:
        assert time.monotonic() < deadline, "no cleanup reached Array"
        time.sleep(0.02)
    return writer


def expiries_in_stream(records: list[dict[str, Any]]) -> dict[str, str]:
    """The stream's TTL deletions of cleanup records: event id -> the account each names."""
    return {
        r["eventID"]: r["dynamodb"]["OldImage"]["arrayAccountId"]["S"]
        for r in records
        if r["eventName"] == "REMOVE" and r.get("userIdentity") == TTL_IDENTITY
    }


def lake_events(stack: CleanupStack) -> Counter[tuple[str, str]]:
    """(event id, sequence number) -> how many times the lake's `changes` view holds it."""
    rows = query_lake(stack.consumer.settings, "SELECT event_id, sequence_number FROM changes")
    return Counter((str(event_id), str(sequence)) for event_id, sequence in rows)


def final_outcomes(stack: CleanupStack) -> dict[str, list[tuple[str, str | None]]]:
    """Source event id -> the final cleanup outcomes (kind, detail) the lake's `outcomes` view holds."""
    finals = sorted(kind.value for kind in FINAL_CLEANUP_OUTCOMES)
    rows = query_lake(
        stack.consumer.settings,
        "SELECT source_event_id, kind, detail FROM outcomes WHERE kind IN (SELECT unnest(?))",
        [finals],
    )
    found: dict[str, list[tuple[str, str | None]]] = {}
    for source, kind, detail in rows:
        found.setdefault(str(source), []).append((str(kind), None if detail is None else str(detail)))
    return found


# A 404 answering a delete this processor had already sent: a kill between the request and its answer
# leaves an unconfirmed note (issue 22: recorded as already deleted, saying what came before it).
_OUR_EARLIER_DELETE = {
    (OutcomeKind.CLEANUP_DELETED.value, None),
    *(
        (OutcomeKind.CLEANUP_ALREADY_DELETED.value, detail)
        for detail in ("earlier_attempt", "earlier_request", "unconfirmed_attempt")
    ),
}


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def finish_every_expiry(stack: CleanupStack, expiries: set[str], timeout: float) -> None:
    """Wait for a final outcome per expiry, draining the retry queue meanwhile as an operator's retry
    worker would: a cleanup the kill left claimed, or one whose budget ran out under load, is parked
    there (`cleanup.parked`, not final) and only the retry worker finishes it. At CI's load (3 xdist
    workers on 2 cores) parks happen; without a drain such an expiry never got its final outcome.
    Drained in slices, so that the outcomes are read again between them; a timeout says where the
    unfinished expiries stand (CI saw 13 unfinished once, never reproduced here)."""
    deadline = time.monotonic() + timeout
    drains: list[DrainReport] = []
    while missing := expiries - set(final_outcomes(stack)):
        assert time.monotonic() < deadline, unfinished_expiries(stack, missing, drains)
        drains.append(stack.drain_retry_queue(max_seconds=max(1.0, min(60.0, deadline - time.monotonic()))))
        time.sleep(0.5)


def unfinished_expiries(stack: CleanupStack, missing: set[str], drains: list[DrainReport]) -> str:
    """Where expiries without a final outcome stand: delivered at all (in `changes`), the outcomes the
    lake holds for them (kind:detail, counted), what the drains did and the queue's depth now."""
    delivered = {str(e) for (e,) in query_lake(stack.consumer.settings, "SELECT event_id FROM changes")}
    rows = query_lake(
        stack.consumer.settings,
        "SELECT kind, detail FROM outcomes WHERE source_event_id IN (SELECT unnest(?))",
        [sorted(missing)],
    )
    kinds = Counter(f"{kind}:{detail}" for kind, detail in rows)
    totals = Counter[str]()
    for report in drains:
        totals.update(received=report.received, finished=report.finished, reparked=report.reparked)
    empty = drains[-1].empty if drains else None
    return (
        f"no final outcome for {len(missing)} expiries: {len(missing & delivered)} of them in `changes`;"
        f" their outcomes {dict(kinds)}; {len(drains)} drains {dict(totals)}, the last one empty={empty};"
        f" Array calls {Counter(call.status for call in stack.array.calls())}"
    )


def assert_nothing_missed(endpoint: str, consumer: RunningConsumer) -> list[dict[str, object]]:
    """Every stream event in the journal, a replayed one with its own id and position."""
    stream = {
        r["eventID"]: r["dynamodb"]["SequenceNumber"] for r in stream_contents(endpoint, consumer.stream_arn)
    }
    assert len(stream) >= WRITES
    events = consumer.wait_for(lambda evs: set(stream) <= {e["event_id"] for e in evs}, timeout=240)
    for event in events:
        # A replayed event is the same event: same id, same position.
        assert stream[str(event["event_id"])] == event["sequence_number"]
    return events


def assert_lake_complete_and_one_final_outcome_per_expiry(stack: CleanupStack) -> None:
    """Once the load has run out: every stream event in the lake's `changes` exactly once, and exactly
    one final outcome per expiry in its `outcomes`. Where Array's log shows this processor's delete, that
    outcome is `deleted`, or `already_deleted` naming an earlier request of this processor's (a kill
    took the first answer), never a bare 404."""
    wait_until(lambda: stack.emulator.deleted_total >= EXPIRIES, 120, "the expiries")
    expiries = expiries_in_stream(stream_contents(stack.endpoint, stack.consumer.stream_arn))
    assert len(expiries) == EXPIRIES
    finish_every_expiry(stack, set(expiries), 480)
    # The cleanups' own writes (rows marked Removed) are in the stream by now.
    stream = stream_contents(stack.endpoint, stack.consumer.stream_arn)
    expected = {(r["eventID"], r["dynamodb"]["SequenceNumber"]) for r in stream}
    assert len(expected) >= WRITES + 5 * EXPIRIES
    wait_until(lambda: expected <= set(lake_events(stack)), 240, "every stream event in the lake")

    landed = lake_events(stack)
    assert set(landed) == expected  # nothing lost, nothing foreign
    assert {event: n for event, n in landed.items() if n != 1} == {}  # nothing duplicated

    outcomes = final_outcomes(stack)
    deleted_here = {call.user_id for call in stack.array.calls() if call.deleted}
    assert deleted_here == set(expiries.values())  # every expiry's account deleted, by this processor
    assert {e: kinds for e, kinds in outcomes.items() if e in expiries and len(kinds) != 1} == {}
    # Each expiry whose account this processor deleted, with its final outcomes and Array's answers.
    not_deleted = {
        event_id: (outcomes[event_id], [call.status for call in stack.array.calls_for(account)])
        for event_id, account in expiries.items()
        if account in deleted_here and not set(outcomes[event_id]) <= _OUR_EARLIER_DELETE
    }
    assert not_deleted == {}


def test_killing_the_python_child_mid_run_misses_nothing_and_leaves_one_final_outcome_per_expiry(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    with cleanup_stack(moto_server, tmp_path) as stack:
        writer = start_load_until_cleanups_run(stack)
        daemon = stack.consumer.daemons["worker-1"]
        for pid in python_children(daemon):
            os.kill(pid, signal.SIGKILL)
        # A dead child takes the daemon down with it (the multilang contract); the supervisor restarts it.
        daemon.wait(timeout=120)
        stack.consumer.start_worker("worker-1")
        writer.join()
        assert_lake_complete_and_one_final_outcome_per_expiry(stack)
        events = assert_nothing_missed(stack.endpoint, stack.consumer)  # the stream is still now
        assert len({e["pid"] for e in events}) >= 2  # a new child delivered the rest


def test_killing_the_jvm_mid_run_misses_nothing_and_leaves_one_final_outcome_per_expiry(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    with cleanup_stack(moto_server, tmp_path) as stack:
        writer = start_load_until_cleanups_run(stack)
        stack.consumer.daemons["worker-1"].kill()
        stack.consumer.start_worker("worker-1")
        writer.join()
        assert_lake_complete_and_one_final_outcome_per_expiry(stack)
        events = assert_nothing_missed(stack.endpoint, stack.consumer)  # the stream is still now
        assert len({e["pid"] for e in events}) >= 2  # two different child processes delivered them


def test_a_second_worker_takes_the_lease_and_continues_from_the_checkpoint(
    moto_endpoint: str, tmp_path: Path
) -> None:
    with running_consumer(moto_endpoint, tmp_path, worker_id="") as consumer:
        table = consumer.settings.consumer.table_name
        first = consumer.start_worker("worker-a")
        write_steadily(moto_endpoint, table, 50, per_second=100).join()
        owner = consumer.wait_for(lambda evs: len(evs) >= 50)[0]["worker_id"]
        standby = "worker-b" if owner == "worker-a" else "worker-a"
        if standby == "worker-b":
            consumer.start_worker("worker-b")
        else:  # the lease went to the other one; start the standby under the first name is impossible
            pytest.fail("worker-a was the only worker and must own the lease")
        time.sleep(5)  # worker-b joins the lease table
        first.kill()
        writer = write_steadily(moto_endpoint, table, WRITES - 50, per_second=100, first=50)
        writer.join()
        events = assert_nothing_missed(moto_endpoint, consumer)
        after = [e for e in events if e["worker_id"] == "worker-b"]
        assert after, "the standby worker never took the lease"
        assert int(str(after[0]["sequence_number"])) > int(str(events[0]["sequence_number"]))

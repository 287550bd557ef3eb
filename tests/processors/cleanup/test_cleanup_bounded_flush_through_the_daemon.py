"""A cleanup flush through the real daemon and child while AWS hangs: moto, in a process of its own, is
stopped (SIGSTOP) for 30 s in the middle of a flush. The flush returns within its time budget
(`array.retry_budget_seconds`) + 1 s, and the work it could not finish is not lost: its send to the
retry queue (which hangs too) counts as sent, and lands once moto runs again (or, for a window that came
while the queue was silent, it is parked in the consumer's local store).

Array answers slowly and one call at a time (`array.concurrency` 1), so moto is stopped while the
flush's first delete is in flight: that expiry's mark and the other expiries' guard reads hang. The
flush's duration is the one the handler logs for it (`cleanup flush`, `seconds`), read from the daemon's
log."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from devstack import _writes as writes
from devstack.fake_array import FakeArrayServer, FaultPlan
from devstack.moto_process import moto_process
from entitlements.compose import setup_retry_queues
from pipeline.parking import ParkedWork
from schema.table import EntitlementStatus
from tests.processors.cleanup.cleanup_helpers import receive_all
from tests.support.daemon_log import child_entries, logged_at
from tests.support.kcl import aws_client, dynamodb, running_consumer, stream_contents
from tests.support.polling import wait_for

pytestmark = pytest.mark.kcl

BUDGET_SECONDS = 4.0
FROZEN_SECONDS = 30.0
EXPIRIES = 3
ARRAY_LATENCY_SECONDS = 1.5  # inside the budget's Array window: the first delete is answered


def test_a_flush_during_a_30_s_aws_hang_returns_within_its_budget_and_loses_none_of_its_work(
    tmp_path: Path,
) -> None:
    with (
        moto_process(ttl_interval_seconds=0.2) as moto,
        FakeArrayServer(faults=FaultPlan(latency_seconds=ARRAY_LATENCY_SECONDS)) as array,
        running_consumer(
            moto.endpoint,
            tmp_path / "state",
            array={
                "base_url": array.url,
                "retry_budget_seconds": BUDGET_SECONDS,
                "max_attempts": 2,
                "concurrency": 1,
            },
            # A lease outlives the hang, so the daemon stays the shard's owner throughout.
            consumer={
                "failover_time_ms": 60_000,
                "handler_retry_attempts": 2,
                "handler_retry_max_seconds": 1.0,
            },
        ) as consumer,
    ):
        settings = consumer.settings
        client = dynamodb(moto.endpoint)
        table = settings.consumer.table_name
        accounts = {f"user-{uuid.uuid4().hex[:8]}": f"arr-{uuid.uuid4().hex[:8]}" for _ in range(EXPIRIES)}
        now = datetime.now(UTC)
        for user, account in accounts.items():
            row = writes.entitlement_row(
                user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=now
            )
            client.put_item(**writes.signup_put(table, row))
            array.add_users([account])
        ttl = {"N": str(int(time.time()) + 4)}  # one TTL: one emulator pass, one window
        for user, account in accounts.items():
            client.transact_write_items(
                TransactItems=writes.cancellation_transaction(table, user, account, ttl=ttl, now=now)
            )

        wait_for(lambda: array.max_in_flight >= 1, timeout=240, interval=0.01)  # the flush's first delete
        frozen_at = time.time()
        moto.freeze()
        try:
            time.sleep(FROZEN_SECONDS)
        finally:
            moto.thaw()

        sqs = aws_client(moto.endpoint, "sqs")
        queue_url = setup_retry_queues(settings).queue_url
        queued: set[str] = set()

        def landed() -> set[str]:
            for message in receive_all(sqs, queue_url):
                queued.add(json.loads(message["Body"])["source_sequence_number"])
            parked = ParkedWork(settings.consumer.parked_dir)
            return queued | {r.sequence_number for b in parked if b.handler == "cleanup" for r in b.records}

        log = settings.consumer.state_dir / "daemon" / "daemon-worker-1.log"
        flush: dict[str, Any] = wait_for(
            lambda: next(
                (e for e in child_entries(log) if e.get("msg") == "cleanup flush" and e.get("cleanups")),
                None,
            ),
            timeout=60,
        )
        expiries = {
            record["dynamodb"]["SequenceNumber"]: record["dynamodb"]["Keys"]["pk"]["S"].removeprefix("USER#")
            for record in stream_contents(moto.endpoint, consumer.stream_arn)
            if record["eventName"] == "REMOVE"
        }

        unfinished = {
            sequence for sequence, user in expiries.items() if accounts[user] not in array.deleted_users()
        }
        arrived = wait_for(lambda: landed() if unfinished <= landed() else None, timeout=60)

    budget = settings.array.retry_budget_seconds
    assert flush["cleanups"] == EXPIRIES
    assert flush["seconds"] <= budget + 1.0
    assert logged_at(flush) >= frozen_at  # the flush was under way when moto stopped, and ran into it
    assert len(expiries) == EXPIRIES and unfinished  # the hang left work undone
    assert unfinished <= arrived  # nothing lost: on the retry queue, or parked locally

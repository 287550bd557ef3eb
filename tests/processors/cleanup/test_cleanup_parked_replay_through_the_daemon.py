"""A cleanup batch the real child parked, replayed: through the real daemon and child, four expiries
are flushed while the cleanup's retry queue is gone and Array's credentials expire after its second
delete. The two deleted expiries are finished (their outcomes land in the lake) and only the other two
are parked in the consumer's local store; `entitlements replay-parked`, once the faults clear, deletes
those two. Every account is deleted exactly once at the fake Array (no finished expiry runs again) and
each expiry's final outcome in the lake is `cleanup.deleted`.

Array answers one call at a time (`array.concurrency` 1): the first two deletes pass, the third is held
until the credentials have expired (then it is refused, and the fourth with it), so which expiries
finish is decided by Array, not by timing."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config import Settings, settings_environment
from devstack import _writes as writes
from devstack.fake_array import DELETE_USER, FakeArrayServer
from devstack.moto_server import MotoServer
from entitlements.cli import app
from entitlements.compose import setup_retry_queues
from pipeline.parking import ParkedWork
from schema.table import EntitlementStatus
from tests.support.kcl import aws_client, dynamodb, running_consumer, stream_contents, ttl_emulator
from tests.support.lake import query_lake
from tests.support.polling import wait_for

pytestmark = pytest.mark.kcl

EXPIRIES = 4
FINALS = "('cleanup.deleted', 'cleanup.already_deleted', 'cleanup.refused_by_guard', 'cleanup.failed')"


def test_a_parked_cleanup_batch_replayed_deletes_only_what_had_not_finished_and_lands_every_outcome(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    with (
        FakeArrayServer() as array,
        running_consumer(
            moto_server.endpoint,
            tmp_path / "state",
            array={"base_url": array.url, "retry_budget_seconds": 20.0, "max_attempts": 2, "concurrency": 1},
            consumer={"handler_retry_attempts": 2, "handler_retry_max_seconds": 1.0},
        ) as consumer,
        ttl_emulator(moto_server, consumer),
    ):
        settings = consumer.settings
        table = settings.consumer.table_name
        client = dynamodb(moto_server.endpoint)
        accounts = {f"user-{uuid.uuid4().hex[:8]}": f"arr-{uuid.uuid4().hex[:8]}" for _ in range(EXPIRIES)}
        now = datetime.now(UTC)
        for user, account in accounts.items():
            row = writes.entitlement_row(
                user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=now
            )
            client.put_item(**writes.signup_put(table, row))
            array.add_users([account])
        # The child is up (it looked the retry queue up at its start) once the signups are journalled.
        wait_for(lambda: len(consumer.events()) >= EXPIRIES, timeout=240)
        sqs = aws_client(moto_server.endpoint, "sqs")
        sqs.delete_queue(QueueUrl=setup_retry_queues(settings).queue_url)  # the fault: no retry queue
        array.hooks.set("open")
        array.hold(DELETE_USER, until="open", times=2)
        third = array.hold(DELETE_USER, until="credentials-expired")

        ttl = {"N": str(int(time.time()) + 4)}  # one TTL: one emulator pass
        for user, account in accounts.items():
            client.transact_write_items(
                TransactItems=writes.cancellation_transaction(table, user, account, ttl=ttl, now=now)
            )
        assert third.wait_arrived(240)  # the third delete, held
        array.expire_credentials()  # the third delete and every later one are refused (401)
        array.hooks.set("credentials-expired")

        parked = ParkedWork(settings.consumer.parked_dir)
        batches = wait_for(lambda: [b for b in parked if b.handler == "cleanup"], timeout=120)
        expiries = {
            record["dynamodb"]["Keys"]["pk"]["S"].removeprefix("USER#"): record
            for record in stream_contents(moto_server.endpoint, consumer.stream_arn)
            if record["eventName"] == "REMOVE"
        }
        deleted_first = set(array.deleted_users())
        finished_events = {expiries[u]["eventID"] for u, a in accounts.items() if a in deleted_first}
        wait_for(lambda: _events_with_a_final_outcome(settings) >= finished_events, timeout=120)
        consumer.stop_all()

        array.restore_credentials()
        setup_retry_queues(settings)  # the fault clears: the setup command makes the queue again
        replayed = CliRunner().invoke(app, ["replay-parked"], env=settings_environment(settings))

        calls = {account: array.calls_for(account) for account in accounts.values()}

    assert replayed.exit_code == 0, replayed.output
    assert len(deleted_first) == 2  # the two deletes before the credentials expired
    parked_sequences = sorted(record.sequence_number for batch in batches for record in batch.records)
    unfinished = [u for u, a in accounts.items() if a not in deleted_first]
    assert parked_sequences == sorted(expiries[u]["dynamodb"]["SequenceNumber"] for u in unfinished)
    assert ParkedWork(settings.consumer.parked_dir).count() == 0
    for account in deleted_first:
        assert [(call.status, call.deleted) for call in calls[account]] == [(200, True)]
    for user in unfinished:
        assert [call.status for call in calls[accounts[user]] if call.deleted] == [200]
    for user in accounts:
        assert _final_outcomes(settings, expiries[user]["eventID"]) == ["cleanup.deleted"]


def _events_with_a_final_outcome(settings: Settings) -> set[str]:
    rows = query_lake(settings, f"SELECT source_event_id FROM outcomes WHERE kind IN {FINALS}")
    return {str(row[0]) for row in rows}


def _final_outcomes(settings: Settings, source_event_id: str) -> list[str]:
    rows = query_lake(
        settings,
        f"SELECT kind FROM outcomes WHERE source_event_id = ? AND kind IN {FINALS}",
        [source_event_id],
    )
    return sorted(str(row[0]) for row in rows)

"""The Kinesis source through the real daemon (issue 23): one table on the local stack streams to its
DynamoDB stream and, forwarded as Kinesis Data Streams for DynamoDB would put them, to a Kinesis stream
of 4 shards with duplicates and reorders injected. Two consumers read the same writes: the DynamoDB
Streams consumer (the adapter; cleanup in shadow mode, so it never deletes) and the Kinesis consumer
(KCL's own Kinesis scheduler in the launcher; cleanup live on the fake Array). Each lands its own lake.

What must hold: the two lakes' `changes` are the same rows, position columns aside (the Kinesis
consumer's duplicates dropped and its reorders undone), and every expired account is deleted once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from devstack import _writes as writes
from devstack.fake_array import FakeArrayServer
from devstack.kinesis_forwarder import Faults, KinesisForwarder
from devstack.moto_server import MotoServer
from devstack.streams import read_kinesis_stream
from schema.clock import Clock, clock_from_settings
from schema.table import EntitlementStatus, entitlement_key
from tests.support.kcl import (
    RunningConsumer,
    aws_client,
    dynamodb,
    forwarded_table,
    running_consumer,
    stream_contents,
    ttl_emulator,
)
from tests.support.lake import query_lake
from tests.support.polling import wait_for

pytestmark = pytest.mark.kcl

SHARDS = 4
# 63 simulated days pass in about 6 real seconds: a cancellation expires within the test.
SPEED = 63 * 86_400 / 6
# Where a change sits in its stream: differs between the sources by design (schema/lake.md).
POSITION_COLUMNS = ("stream_arn", "shard_id", "sequence_number", "sequence_key")


@dataclass
class TwoSources:
    streams_consumer: RunningConsumer
    kinesis_consumer: RunningConsumer
    forwarder: KinesisForwarder
    array: FakeArrayServer
    clock: Clock
    client: Any
    endpoint: str
    kinesis_name: str
    kinesis_arn: str

    @property
    def table(self) -> str:
        return self.kinesis_consumer.settings.consumer.table_name

    def signup(self, user: str, account: str) -> None:
        row = writes.entitlement_row(
            user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=self.clock.now()
        )
        self.client.put_item(**writes.signup_put(self.table, row))
        self.array.add_users([account])

    def cancel(self, user: str, account: str) -> None:
        now = self.clock.now()
        ttl = {"N": str(writes.ttl_after(now, 63))}
        self.client.transact_write_items(
            TransactItems=writes.cancellation_transaction(self.table, user, account, ttl=ttl, now=now)
        )

    def reactivate(self, user: str, account: str) -> None:
        self.client.transact_write_items(
            TransactItems=writes.reactivation_transaction(self.table, user, account, now=self.clock.now())
        )

    def status(self, user: str, account: str) -> str:
        key = {k: {"S": v} for k, v in entitlement_key(user, account).items()}
        item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True)["Item"]
        return str(item["status"]["S"])


def changes(consumer: RunningConsumer) -> list[tuple[str, ...]]:
    """The consumer's lake's `changes`, position columns aside, as sortable text rows."""
    excluded = ", ".join(POSITION_COLUMNS)
    rows = query_lake(consumer.settings, f"SELECT * EXCLUDE ({excluded}) FROM changes")
    return sorted(tuple(repr(value) for value in row) for row in rows)


def landed(consumer: RunningConsumer) -> int:
    rows = query_lake(consumer.settings, "SELECT count(*) FROM changes")
    return int(rows[0][0]) if rows else 0


@pytest.fixture(scope="module")
def sources(moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoSources]:
    endpoint = moto_server.endpoint
    now = datetime.now(UTC)
    clock = {"start": now.isoformat(), "anchor": now.isoformat(), "speed": SPEED}
    forwarded = forwarded_table(
        endpoint,
        SHARDS,
        # A reorder needs the item's next change in the same forwarded batch: few changes qualify (fewer
        # under load, when the forwarder's batches are small), so their rate is high enough to see any.
        faults=Faults(duplicate_rate=0.05, reorder_rate=0.5, seed=23),
    )
    table, forwarder = (forwarded.name, forwarded.stream_arn), forwarded.forwarder
    kinesis_name, kinesis_arn = forwarded.kinesis_name, forwarded.kinesis_arn
    forwarder.start()
    try:
        with (
            FakeArrayServer() as array,
            running_consumer(
                endpoint,
                tmp_path_factory.mktemp("kinesis-kcl"),
                table=table,
                clock=clock,
                source={"kind": "kinesis", "stream_arn": kinesis_arn},
                array={"base_url": array.url, "retry_budget_seconds": 5.0, "max_attempts": 2},
            ) as kinesis_consumer,
            running_consumer(
                endpoint,
                tmp_path_factory.mktemp("streams-kcl"),
                table=table,
                clock=clock,
                # The reference reader of the same writes: it must not delete what the other deletes.
                cleanup={"mode": "shadow"},
                array={"base_url": array.url, "retry_budget_seconds": 5.0, "max_attempts": 2},
            ) as streams_consumer,
        ):
            source_clock = clock_from_settings(kinesis_consumer.settings.clock)
            with ttl_emulator(moto_server, kinesis_consumer, source_clock):
                yield TwoSources(
                    streams_consumer=streams_consumer,
                    kinesis_consumer=kinesis_consumer,
                    forwarder=forwarder,
                    array=array,
                    clock=source_clock,
                    client=dynamodb(endpoint),
                    endpoint=endpoint,
                    kinesis_name=kinesis_name,
                    kinesis_arn=kinesis_arn,
                )
    finally:
        forwarder.stop()


def ids() -> tuple[str, str]:
    return f"user-{uuid.uuid4().hex[:8]}", f"arr-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def workload(sources: TwoSources) -> dict[str, list[tuple[str, str]]]:
    """Signups; a third cancelled (their TTL expires: the Kinesis consumer's cleanup deletes and marks);
    a sixth cancelled and reactivated (no cleanup); then every change landed in both lakes."""
    users = [ids() for _ in range(36)]
    for user, account in users:
        sources.signup(user, account)
    expiring = users[::3]
    reactivated = users[1::6]
    for user, account in expiring:
        sources.cancel(user, account)
    for user, account in reactivated:  # back to back: one item's two changes, likely in one batch
        sources.cancel(user, account)
        sources.reactivate(user, account)
    wait_for(lambda: all(sources.status(u, a) == "Removed" for u, a in expiring), timeout=300)
    # The marks are changes too: wait until the forwarder has put every change the table's stream holds
    # and both consumers have landed each of them (duplicates dropped: no more than the stream holds).
    held = len(stream_contents(sources.endpoint, sources.streams_consumer.stream_arn))
    wait_for(lambda: sources.forwarder.forwarded >= held, timeout=60)
    wait_for(lambda: landed(sources.streams_consumer) >= held, timeout=120)
    wait_for(lambda: landed(sources.kinesis_consumer) >= held, timeout=120)
    return {"all": users, "expiring": expiring, "reactivated": reactivated}


def test_the_kinesis_stream_holds_the_injected_duplicates_and_reorders(
    sources: TwoSources, workload: dict[str, list[tuple[str, str]]]
) -> None:
    # Without them the comparison below would not test the Kinesis consumer's order and dedupe.
    assert sources.forwarder.duplicated > 0
    assert sources.forwarder.reordered > 0
    held = len(stream_contents(sources.endpoint, sources.streams_consumer.stream_arn))
    on_kinesis = list(read_kinesis_stream(aws_client(sources.endpoint, "kinesis"), sources.kinesis_name))
    assert len(on_kinesis) == held + sources.forwarder.duplicated


def test_the_kinesis_lake_holds_the_same_changes_as_the_streams_lake(
    sources: TwoSources, workload: dict[str, list[tuple[str, str]]]
) -> None:
    from_streams = changes(sources.streams_consumer)
    from_kinesis = changes(sources.kinesis_consumer)
    assert len(from_kinesis) == len(from_streams)
    assert from_kinesis == from_streams


def test_the_kinesis_lake_is_positioned_on_every_shard_of_the_kinesis_stream(
    sources: TwoSources, workload: dict[str, list[tuple[str, str]]]
) -> None:
    rows = query_lake(sources.kinesis_consumer.settings, "SELECT DISTINCT stream_arn, shard_id FROM changes")
    assert {arn for arn, _ in rows} == {sources.kinesis_arn}
    assert len(rows) == SHARDS


def test_cleanup_through_kinesis_deletes_each_expired_account_once(
    sources: TwoSources, workload: dict[str, list[tuple[str, str]]]
) -> None:
    deleted = sources.array.deleted_users()
    assert sorted(deleted) == sorted(account for _, account in workload["expiring"])

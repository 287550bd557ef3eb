"""The switch-over from the DynamoDB stream to Kinesis through the real daemons, with kill -9 (issue 23
item 4; docs/operations/sources.md, "Switch-over"): one table on the local stack, its DynamoDB stream's
consumer and the consumer of its forwarded Kinesis stream (2 shards, duplicates and reorders injected)
land ONE lake and clean up on one fake Array, both given the same handover time H
(`ENTITLEMENTS_SOURCE__HANDOVER_AT`), a few seconds into continuous writes (signups, cancellations
whose TTL expires within the test, reactivations). Around H a child of each consumer is killed with
SIGKILL, twice; a dead child takes its daemon down (the multilang contract) and the daemon is started
again on the same settings, as `entitlements consume`'s supervisor does.

What must hold: every change the table's stream holds is in the lake's `changes` exactly once by its
content (item key, kind, time, images; position columns aside): none lost, none doubled; the DynamoDB
stream's rows are all before H and the Kinesis rows all at or after it; every expired account is
deleted at Array once; and the DynamoDB stream consumer's handover figures say it is done (the
runbook's check)."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devstack import _writes as writes
from devstack.fake_array import FakeArrayServer
from devstack.kinesis_forwarder import Faults, KinesisForwarder
from devstack.moto_server import MotoServer
from entitlements.commands._stores import build_recovery
from entitlements.compose import drain_retry_queue as drain
from schema.clock import Clock, clock_from_settings
from schema.table import EntitlementStatus, entitlement_key
from tests.support.kcl import (
    RETRY_WORKER_BUDGET_SECONDS,
    RunningConsumer,
    dynamodb,
    forwarded_table,
    python_children,
    running_consumer,
    stream_contents,
    ttl_emulator,
)
from tests.support.lake import query_lake
from tests.support.polling import wait_for

pytestmark = pytest.mark.kcl

SHARDS = 2
# 63 simulated days pass in about 6 real seconds: a cancellation expires within the test.
SPEED = 63 * 86_400 / 6
POSITION_COLUMNS = ("stream_arn", "shard_id", "sequence_number", "sequence_key")
# H is this long after the fixture starts: both daemons start and take their leases (10 to 20 s at CI's
# load) with the writes already going, so the kills land around H.
LEAD_SECONDS = 30
KILLS = 2  # kills of each consumer's child around H
WRITE_EVERY = 0.1  # seconds between two users' writes


@dataclass
class Writer:
    """Continuous writes on a thread: a signup per turn; a third of the users cancelled (their TTL
    expires: a cleanup), a sixth cancelled and reactivated at once. Runs until `stop` is set."""

    client: Any
    table: str
    array: FakeArrayServer
    clock: Clock
    stop: threading.Event = field(default_factory=threading.Event)
    expiring: list[tuple[str, str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def run(self) -> None:
        turn = 0
        while not self.stop.is_set():
            user, account = f"user-{uuid.uuid4().hex[:8]}", f"arr-{uuid.uuid4().hex[:8]}"
            try:
                self._signup(user, account)
                if turn % 3 == 0:
                    self._cancel(user, account)
                    self.expiring.append((user, account))
                elif turn % 6 == 1:
                    self._cancel(user, account)
                    self.client.transact_write_items(
                        TransactItems=writes.reactivation_transaction(
                            self.table, user, account, now=self.clock.now()
                        )
                    )
            except Exception as failed:  # the assertion names it; a write lost here is not the consumers'
                self.failures.append(type(failed).__name__)
            turn += 1
            time.sleep(WRITE_EVERY)

    def _signup(self, user: str, account: str) -> None:
        row = writes.entitlement_row(
            user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=self.clock.now()
        )
        self.array.add_users([account])
        self.client.put_item(**writes.signup_put(self.table, row))

    def _cancel(self, user: str, account: str) -> None:
        now = self.clock.now()
        ttl = {"N": str(writes.ttl_after(now, 63))}
        self.client.transact_write_items(
            TransactItems=writes.cancellation_transaction(self.table, user, account, ttl=ttl, now=now)
        )


@dataclass
class SwitchOver:
    streams: RunningConsumer
    kinesis: RunningConsumer
    forwarder: KinesisForwarder
    array: FakeArrayServer
    writer: Writer
    handover_at: datetime
    endpoint: str
    kinesis_arn: str
    kills: Counter[str]

    @property
    def table(self) -> str:
        return self.streams.settings.consumer.table_name

    def status(self, user: str, account: str) -> str:
        key = {k: {"S": v} for k, v in entitlement_key(user, account).items()}
        item = self.writer.client.get_item(TableName=self.table, Key=key, ConsistentRead=True)["Item"]
        return str(item["status"]["S"])


def wait_until_now(moment: datetime) -> None:
    time.sleep(max((moment - datetime.now(UTC)).total_seconds(), 0.0))


def kill_a_child_and_restart(consumer: RunningConsumer) -> None:
    """SIGKILL one Python child of the consumer's worker; the dead child takes the daemon down with it
    (the multilang contract); start it again on the same settings, as `entitlements consume`'s
    supervisor does (`pipeline.daemon.supervise`: the same daemon, whose lake writer outlives the JVM)."""
    daemon = consumer.daemons["worker-1"]
    # Mid-work: this run's children have committed (a shard's stats written since it started), and go on.
    wait_for(daemon.delivered, timeout=120)
    children = wait_for(lambda: python_children(daemon), timeout=120)
    os.kill(children[0], signal.SIGKILL)
    daemon.wait(timeout=120)
    daemon.start()


def changes(consumer: RunningConsumer) -> list[tuple[str, ...]]:
    """The lake's `changes` (the view: a replay of one position is landed once), position columns aside,
    as text rows: a change's content identity."""
    excluded = ", ".join(POSITION_COLUMNS)
    rows = query_lake(consumer.settings, f"SELECT * EXCLUDE ({excluded}) FROM changes")
    return [tuple(repr(value) for value in row) for row in rows]


def landed(consumer: RunningConsumer) -> int:
    rows = query_lake(consumer.settings, "SELECT count(*) FROM changes")
    return int(rows[0][0]) if rows else 0


def drain_retry_queue(run: SwitchOver) -> None:
    """What an operator's retry worker does: finish the cleanups a consumer parked (a kill's in-flight
    claim, a budget run out under load), with the shipped budget, landing outcomes in the one lake."""
    settings = run.streams.settings
    array = settings.array.model_copy(update={"retry_budget_seconds": RETRY_WORKER_BUDGET_SECONDS})
    drain(settings.model_copy(update={"array": array}), max_seconds=10)


def handover_figures(consumer: RunningConsumer) -> list[dict[str, Any]]:
    folder = consumer.settings.consumer.state_dir / "handover"
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]


@pytest.fixture(scope="module")
def switch_over(moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwitchOver]:
    endpoint = moto_server.endpoint
    now = datetime.now(UTC)
    clock = {"start": now.isoformat(), "anchor": now.isoformat(), "speed": SPEED}
    faults = Faults(duplicate_rate=0.03, reorder_rate=0.3, seed=4)
    forwarded = forwarded_table(endpoint, SHARDS, faults=faults)
    table = (forwarded.name, forwarded.stream_arn)
    lake = {"root": str(tmp_path_factory.mktemp("switch-over-lake") / "lake")}
    # H is durable configuration, given to both consumers before they start (a restart keeps it): a
    # whole second far enough ahead that both daemons run (children up) before it, writes going on.
    handover_at = datetime.fromtimestamp(math.ceil(time.time()) + LEAD_SECONDS, UTC)
    handover = {"handover_at": handover_at.isoformat()}
    forwarded.forwarder.start()
    try:
        with FakeArrayServer() as array:
            array_settings = {"base_url": array.url, "retry_budget_seconds": 5.0, "max_attempts": 2}
            with (
                running_consumer(
                    endpoint,
                    tmp_path_factory.mktemp("switch-streams"),
                    table=table,
                    clock=clock,
                    lake=lake,
                    source=handover,
                    array=array_settings,
                ) as streams,
                running_consumer(
                    endpoint,
                    tmp_path_factory.mktemp("switch-kinesis"),
                    table=table,
                    clock=clock,
                    lake=lake,
                    source={**handover, "kind": "kinesis", "stream_arn": forwarded.kinesis_arn},
                    array=array_settings,
                ) as kinesis,
            ):
                source_clock = clock_from_settings(streams.settings.clock)
                writer = Writer(dynamodb(endpoint), forwarded.name, array, source_clock)
                thread = threading.Thread(target=writer.run, name="switch-over-writes", daemon=True)
                with ttl_emulator(moto_server, streams, source_clock):
                    thread.start()
                    try:
                        run = SwitchOver(
                            streams=streams,
                            kinesis=kinesis,
                            forwarder=forwarded.forwarder,
                            array=array,
                            writer=writer,
                            handover_at=handover_at,
                            endpoint=endpoint,
                            kinesis_arn=forwarded.kinesis_arn,
                            kills=Counter(),
                        )
                        hand_over_under_kills(run)
                    finally:
                        writer.stop.set()
                        thread.join(timeout=30)
                    settle(run)
                    yield run
    finally:
        forwarded.forwarder.stop()


def hand_over_under_kills(run: SwitchOver) -> None:
    """Kill a child of each consumer `KILLS` times, the first just before H and the next after it (as
    soon as the restarted workers' children run), then let the writes go on past the last restart."""
    for kill in range(KILLS):
        wait_until_now(run.handover_at + timedelta(seconds=-1 if kill == 0 else 2))
        kill_a_child_and_restart(run.streams)
        run.kills["streams"] += 1
        kill_a_child_and_restart(run.kinesis)
        run.kills["kinesis"] += 1
    for consumer in (run.streams, run.kinesis):  # both restarted workers read again
        daemon = consumer.daemons["worker-1"]
        wait_for(functools.partial(python_children, daemon), timeout=120)
    time.sleep(3)


def settle(run: SwitchOver) -> None:
    """Every expired account deleted and marked (what a consumer parked, a cleanup window whose retry
    queue did not answer under load, replayed and the retry queue drained, as an operator would),
    then every change of the table's stream forwarded and landed."""
    expiring = list(run.writer.expiring)

    def all_removed() -> bool:
        if all(run.status(user, account) == "Removed" for user, account in expiring):
            return True
        for consumer in (run.streams, run.kinesis):  # `entitlements replay-parked` of each consumer
            build_recovery(consumer.settings).replay_parked()
        drain_retry_queue(run)
        return False

    def left() -> str:
        statuses = Counter(run.status(user, account) for user, account in expiring)
        return f"statuses of the {len(expiring)} expiring rows: {dict(statuses)}"

    wait_for(all_removed, timeout=240, describe=left)
    time.sleep(2)  # the marks' own changes reach the stream
    held = len(stream_contents(run.endpoint, run.streams.stream_arn))
    wait_for(lambda: run.forwarder.forwarded >= held, timeout=60)
    with contextlib.suppress(AssertionError):  # a change lost is for the test to name, not the set-up
        wait_for(lambda: landed(run.streams) >= held, timeout=180)
    time.sleep(3)  # a doubled change would land after the last awaited one: give it the time to


def test_every_change_of_the_table_is_in_the_lake_exactly_once(switch_over: SwitchOver) -> None:
    held = stream_contents(switch_over.endpoint, switch_over.streams.stream_arn)
    rows = changes(switch_over.streams)
    doubled = [row for row, count in Counter(rows).items() if count > 1]
    assert doubled == []
    assert len(rows) == len(held)
    landed_ids = query_lake(switch_over.streams.settings, "SELECT event_id FROM changes")
    assert sorted(event_id for (event_id,) in landed_ids) == sorted(r["eventID"] for r in held)


def test_the_streams_rows_are_before_the_handover_and_the_kinesis_rows_at_or_after_it(
    switch_over: SwitchOver,
) -> None:
    rows = query_lake(
        switch_over.streams.settings,
        "SELECT stream_arn = ?, min(created_at), max(created_at), count(*) FROM changes GROUP BY 1",
        [switch_over.kinesis_arn],
    )
    spans = {bool(kinesis): (first, last, count) for kinesis, first, last, count in rows}
    at = switch_over.handover_at
    assert set(spans) == {False, True}  # both consumers landed their side
    assert spans[False][1] < at <= spans[True][0]


def test_each_expired_account_is_deleted_at_array_once(switch_over: SwitchOver) -> None:
    expected = sorted(account for _, account in switch_over.writer.expiring)
    assert expected  # the TTL ran within the test
    assert sorted(switch_over.array.deleted_users()) == expected


def test_the_writes_and_the_kills_ran_across_the_handover(switch_over: SwitchOver) -> None:
    assert switch_over.writer.failures == []
    assert switch_over.kills == {"streams": KILLS, "kinesis": KILLS}
    # Without them, the handover would not be judged on Kinesis's copies and reorders.
    assert switch_over.forwarder.duplicated > 0


def test_the_streams_consumer_is_done_by_the_runbooks_check(switch_over: SwitchOver) -> None:
    figures = handover_figures(switch_over.streams)
    assert [figure["keeps"] for figure in figures] == ["before"]  # one shard
    assert all(figure["past_handover"] for figure in figures)
    skipped_by_kinesis = sum(figure["skipped"] for figure in handover_figures(switch_over.kinesis))
    assert skipped_by_kinesis > 0  # the Kinesis consumer read changes before H and left them

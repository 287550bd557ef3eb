"""Resharding during consumption on the Kinesis source (issue 23, item 3): one consumer (the real daemon)
of a forwarded table's Kinesis stream of 2 shards, while a writer changes a set of items continuously.
While it consumes, one shard is split (SplitShard), and once the children are being read two adjacent
shards (a child of the split and the other original shard) are merged (MergeShards); the writer goes
on, then stops, and the module waits until the lake holds every change written.

The lineage: shardId-000000000000 -> shardId-000000000002 (lower half) + shardId-000000000003 (upper
half); shardId-000000000003 + shardId-000000000001 -> shardId-000000000004. Each item writes to one
shard at a time (partition key: its key), so an item whose hash lies in a closed parent's range has
rows on the parent and then on a child.

What must hold: every change written is in the lake exactly once; each item's changes are there in the
order they were written; each closed parent was read to its end before its children (in the lake: an
item's first row read from a child landed in a later commit than its last row read from the parent)
and its lease ends as SHARD_END. The items are chosen so that every shard's hash range holds some.

The scenario runs once (module fixture); the lake and the lease table are read after it."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from config import Settings
from devstack.kinesis_forwarder import partition_key
from devstack.moto_server import MotoServer
from pipeline.daemon import launcher_application_name
from tests.support.kcl import active_row, aws_client, dynamodb, forwarded_table, running_consumer
from tests.support.lake import query_lake
from tests.support.polling import wait_for

pytestmark = pytest.mark.kcl

SHARDS = 2
ITEMS_PER_QUARTER = 3  # of the hash space: every shard before and after the reshards holds items
WRITE_INTERVAL_SECONDS = 0.04
STARTUP_SECONDS = 180.0  # the JVM's start and KCL's first lease assignment on a loaded 2-core machine
RESHARD_SECONDS = 90.0  # a parent read to its end and its children's leases taken and read
PARENT, OTHER = "shardId-000000000000", "shardId-000000000001"
LOWER, UPPER, MERGED = "shardId-000000000002", "shardId-000000000003", "shardId-000000000004"
# Each closed shard and the shards that continue its hash range.
CHILDREN = {PARENT: {LOWER, UPPER}, UPPER: {MERGED}, OTHER: {MERGED}}
BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)


def _hash(pk: str) -> int:
    key = partition_key({"pk": {"S": pk}, "sk": {"S": "ENTITLEMENT#acct-1"}})
    return int(hashlib.md5(key.encode()).hexdigest(), 16)  # Kinesis routes by the md5 of the key


def chosen_users() -> list[str]:
    """Users whose items fall ITEMS_PER_QUARTER into each quarter of the hash space (the split's
    children are the first two quarters, the other shard the last two)."""
    quarters: dict[int, list[str]] = defaultdict(list)
    while min((len(quarters[q]) for q in range(4)), default=0) < ITEMS_PER_QUARTER:
        user = f"u-{uuid.uuid4().hex[:12]}"
        quarter = _hash(f"USER#{user}") * 4 >> 128
        if len(quarters[quarter]) < ITEMS_PER_QUARTER:
            quarters[quarter].append(user)
    return [user for q in range(4) for user in quarters[q]]


@dataclass
class Writer:
    """Changes the items in turn, one put every interval, each with a later `updatedAt` (the written
    order, which lands in the lake as new_item_updated_at); remembers each item's values in order."""

    client: Any
    table: str
    users: list[str]
    written: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    _count: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reshard-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(WRITE_INTERVAL_SECONDS):
            user = self.users[self._count % len(self.users)]
            stamp = (BASE_TIME + timedelta(seconds=self._count)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            self.client.put_item(TableName=self.table, Item={**active_row(user), "updatedAt": {"S": stamp}})
            self.written[f"USER#{user}"].append(stamp)
            self._count += 1

    @property
    def count(self) -> int:
        return self._count

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


@dataclass(frozen=True)
class Landed:
    """One row of the lake's `changes`, with the commit (Delta version) its file was added in."""

    pk: str
    shard_id: str
    sequence_key: str
    updated_at: str
    version: int


@dataclass(frozen=True)
class Scenario:
    written: dict[str, list[str]]
    rows: list[Landed]
    leases: dict[str, dict[str, Any]]
    settings: Settings


def commit_of_files(settings: Settings) -> dict[str, int]:
    """Each data file of the lake's `changes` table -> the version of the commit that added it (the
    Delta log's add actions; the test's lake runs no compaction, so no file is rewritten)."""
    log = Path(settings.lake.root) / "changes" / "_delta_log"
    added: dict[str, int] = {}
    for entry in sorted(log.glob("*.json")):
        version = int(entry.stem)
        for line in entry.read_text().splitlines():
            action = json.loads(line) if line else {}
            if "add" in action:
                added[Path(action["add"]["path"]).name] = version
    return added


def lake_rows(settings: Settings) -> list[Landed]:
    """`changes` through the tests' lake reader, each row with its commit. `changes` is exactly once;
    the commit is read from `raw_changes`' file name for the same identity."""
    rows = query_lake(
        settings,
        "SELECT c.pk, c.shard_id, c.sequence_key, c.new_item_updated_at, r.filename FROM changes AS c"
        " JOIN (SELECT DISTINCT ON (stream_arn, shard_id, sequence_number) stream_arn, shard_id,"
        " sequence_number, filename FROM raw_changes ORDER BY stream_arn, shard_id, sequence_number,"
        " filename) AS r USING (stream_arn, shard_id, sequence_number)",
    )
    commits = commit_of_files(settings)
    return [
        Landed(str(pk), str(shard), str(key), str(updated), commits[Path(str(filename)).name])
        for pk, shard, key, updated, filename in rows
    ]


def landed_count(settings: Settings) -> int:
    rows = query_lake(settings, "SELECT count(*) FROM changes")
    return int(rows[0][0]) if rows else 0


def shards_landed(settings: Settings) -> set[str]:
    return {str(shard) for (shard,) in query_lake(settings, "SELECT DISTINCT shard_id FROM changes")}


def read_leases(endpoint: str, settings: Settings) -> dict[str, dict[str, Any]]:
    """The application's lease table: shard -> its lease item (checkpoint, owner, parents)."""
    client = dynamodb(endpoint)
    try:
        items = client.scan(TableName=launcher_application_name(settings), ConsistentRead=True)["Items"]
    except client.exceptions.ResourceNotFoundException:
        return {}
    return {str(item["leaseKey"]["S"]): item for item in items if "leaseKey" in item}


def checkpoint(lease: dict[str, Any]) -> str | None:
    value = lease.get("checkpoint", {}).get("S")
    return None if value is None else str(value)


def hash_range(kinesis: Any, name: str, shard_id: str) -> tuple[int, int]:
    shard = next(s for s in kinesis.list_shards(StreamName=name)["Shards"] if s["ShardId"] == shard_id)
    return int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])


@pytest.fixture(scope="module")
def scenario(moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    endpoint = moto_server.endpoint
    forwarded = forwarded_table(endpoint, SHARDS)
    kinesis = aws_client(endpoint, "kinesis")
    writer = Writer(dynamodb(endpoint), forwarded.name, chosen_users())
    forwarded.forwarder.start()
    writer.start()
    try:
        with running_consumer(
            endpoint,
            tmp_path_factory.mktemp("kinesis-reshard"),
            table=(forwarded.name, forwarded.stream_arn),
            source={"kind": "kinesis", "stream_arn": forwarded.kinesis_arn},
            # No compaction: each row's file stays the one its landing commit added (the lineage check).
            lake={"maintenance_enabled": False},
        ) as consumer:
            settings = consumer.settings
            wait_for(lambda: shards_landed(settings) >= {PARENT, OTHER}, timeout=STARTUP_SECONDS)
            low, high = hash_range(kinesis, forwarded.kinesis_name, PARENT)
            kinesis.split_shard(
                StreamName=forwarded.kinesis_name,
                ShardToSplit=PARENT,
                NewStartingHashKey=str((low + high + 1) // 2),
            )
            wait_for(lambda: shards_landed(settings) >= {LOWER, UPPER}, timeout=RESHARD_SECONDS)
            # moto checks adjacency with the lower shard named first.
            kinesis.merge_shards(
                StreamName=forwarded.kinesis_name, ShardToMerge=UPPER, AdjacentShardToMerge=OTHER
            )
            wait_for(lambda: MERGED in shards_landed(settings), timeout=RESHARD_SECONDS)
            writer.stop()
            total = writer.count
            wait_for(lambda: forwarded.forwarder.forwarded >= total, timeout=60)
            wait_for(lambda: landed_count(settings) >= total, timeout=RESHARD_SECONDS)
            yield Scenario(
                written={pk: list(values) for pk, values in writer.written.items()},
                rows=lake_rows(settings),
                leases=read_leases(endpoint, settings),
                settings=settings,
            )
    finally:
        writer.stop()
        forwarded.forwarder.stop()


def test_every_change_written_landed_in_the_lake_exactly_once(scenario: Scenario) -> None:
    written = sorted((pk, value) for pk, values in scenario.written.items() for value in values)
    landed = sorted((row.pk, row.updated_at) for row in scenario.rows)
    assert landed == written


def test_the_changes_were_read_from_every_shard_of_the_lineage(scenario: Scenario) -> None:
    # Without rows on both sides of each reshard the order and lineage checks below would be empty.
    assert {row.shard_id for row in scenario.rows} == {PARENT, OTHER, LOWER, UPPER, MERGED}


def test_each_items_changes_are_in_the_lake_in_the_order_they_were_written(scenario: Scenario) -> None:
    by_item: dict[str, list[Landed]] = defaultdict(list)
    for row in scenario.rows:
        by_item[row.pk].append(row)
    in_lake_order = {
        pk: [row.updated_at for row in sorted(rows, key=lambda r: r.sequence_key)]
        for pk, rows in by_item.items()
    }
    assert in_lake_order == scenario.written


def test_a_closed_parents_rows_of_an_item_landed_before_its_childrens(scenario: Scenario) -> None:
    versions: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row in scenario.rows:
        versions[(row.pk, row.shard_id)].append(row.version)
    went_on: set[str] = set()
    for (pk, shard), on_parent in versions.items():
        for child in CHILDREN.get(shard, set()):
            on_child = versions.get((pk, child))
            if on_child:
                went_on.add(shard)
                assert max(on_parent) < min(on_child), f"{shard} -> {child}"
    assert went_on == set(CHILDREN)  # every closed shard had an item whose changes went on in a child


def test_the_closed_parents_leases_end_as_shard_end(scenario: Scenario) -> None:
    assert {shard: checkpoint(scenario.leases[shard]) for shard in CHILDREN} == dict.fromkeys(
        CHILDREN, "SHARD_END"
    )
    assert {checkpoint(scenario.leases[shard]) for shard in (LOWER, MERGED)}.isdisjoint({"SHARD_END"})

"""devstack/kinesis_forwarder.py: the table's changes on a Kinesis stream of N shards, in Kinesis's
envelope, with duplicates and reordering injected at set rates (moto's Kinesis and DynamoDB)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import boto3
import pytest

from devstack.kinesis_forwarder import (
    Faults,
    KinesisForwarder,
    Precision,
    create_kinesis_stream,
    partition_key,
)
from devstack.streams import read_kinesis_stream
from pipeline.tables import TableDescription

SHARDS = 4


@pytest.fixture
def kinesis(moto_endpoint: str) -> Any:
    return boto3.client("kinesis", endpoint_url=moto_endpoint, region_name="eu-west-1")


@pytest.fixture
def target(kinesis: Any) -> str:
    name = f"changes-{uuid.uuid4().hex[:8]}"
    create_kinesis_stream(kinesis, name, SHARDS)
    return name


def _put_items(dynamodb: Any, table: TableDescription, count: int, *, users: int) -> None:
    for n in range(count):
        dynamodb.put_item(
            TableName=table.table_name,
            Item={
                "pk": {"S": f"USER#u{n % users}"},
                "sk": {"S": "ENTITLEMENT#acct"},
                "status": {"S": "Active"},
                "n": {"N": str(n)},
            },
        )


def _kinesis_records(kinesis: Any, name: str) -> list[tuple[str, dict[str, Any], str]]:
    """(shard id, envelope, partition key) for every record on the stream, shard by shard."""
    return [
        (shard, json.loads(r["Data"]), r["PartitionKey"]) for shard, r in read_kinesis_stream(kinesis, name)
    ]


def _forwarder(
    streams: Any, kinesis: Any, table: TableDescription, target: str, **options: Any
) -> KinesisForwarder:
    assert table.stream_arn is not None
    return KinesisForwarder(
        streams=streams,
        kinesis=kinesis,
        stream_arn=table.stream_arn,
        kinesis_stream_name=target,
        table_name=table.table_name,
        **options,
    )


def test_each_change_is_forwarded_once_in_the_kinesis_envelope(
    dynamodb: Any, streams: Any, kinesis: Any, table: TableDescription, target: str
) -> None:
    _put_items(dynamodb, table, 20, users=5)
    forwarder = _forwarder(streams, kinesis, table, target)
    assert forwarder.forward_available() == 20
    assert forwarder.forward_available() == 0  # nothing forwarded twice
    records = _kinesis_records(kinesis, target)
    assert len(records) == 20
    _, envelope, _ = records[0]
    assert set(envelope) == {
        "awsRegion",
        "eventID",
        "eventName",
        "userIdentity",
        "recordFormat",
        "tableName",
        "dynamodb",
        "eventSource",
    }
    assert (envelope["recordFormat"], envelope["eventSource"], envelope["tableName"]) == (
        "application/json",
        "aws:dynamodb",
        table.table_name,
    )
    assert "SequenceNumber" not in envelope["dynamodb"] and "StreamViewType" not in envelope["dynamodb"]
    assert {"ApproximateCreationDateTime", "Keys", "NewImage", "SizeBytes"} <= set(envelope["dynamodb"])


def test_one_items_changes_go_to_one_shard_in_order_under_its_key(
    dynamodb: Any, streams: Any, kinesis: Any, table: TableDescription, target: str
) -> None:
    _put_items(dynamodb, table, 40, users=8)
    _forwarder(streams, kinesis, table, target).forward_available()
    shards_of: dict[str, set[str]] = {}
    numbers_of: dict[str, list[int]] = {}
    for shard, envelope, key in _kinesis_records(kinesis, target):
        assert key == partition_key(envelope["dynamodb"]["Keys"])
        shards_of.setdefault(key, set()).add(shard)
        numbers_of.setdefault(key, []).append(int(envelope["dynamodb"]["NewImage"]["n"]["N"]))
    assert all(len(shards) == 1 for shards in shards_of.values())
    assert len({next(iter(s)) for s in shards_of.values()}) > 1  # the items spread over the shards
    assert all(numbers == sorted(numbers) for numbers in numbers_of.values())


@pytest.mark.parametrize(("precision", "digits"), [(Precision.MILLISECOND, 13), (Precision.MICROSECOND, 16)])
def test_the_creation_time_is_an_integer_in_the_tables_precision(
    dynamodb: Any,
    streams: Any,
    kinesis: Any,
    table: TableDescription,
    target: str,
    precision: Precision,
    digits: int,
) -> None:
    _put_items(dynamodb, table, 1, users=1)
    _forwarder(streams, kinesis, table, target, precision=precision).forward_available()
    [(_, envelope, _)] = _kinesis_records(kinesis, target)
    moment = envelope["dynamodb"]["ApproximateCreationDateTime"]
    assert isinstance(moment, int) and len(str(moment)) == digits


def test_duplicates_and_reordering_come_at_their_rates_and_lose_nothing(
    dynamodb: Any, streams: Any, kinesis: Any, table: TableDescription, target: str
) -> None:
    _put_items(dynamodb, table, 400, users=8)
    forwarder = _forwarder(
        streams, kinesis, table, target, faults=Faults(duplicate_rate=0.05, reorder_rate=0.05, seed=7)
    )
    forwarder.forward_available()
    records = _kinesis_records(kinesis, target)
    copies = Counter(envelope["eventID"] for _, envelope, _ in records)
    assert len(copies) == 400  # every change is there
    assert sum(n - 1 for n in copies.values()) == forwarder.duplicated
    assert 5 <= forwarder.duplicated <= 40 and 5 <= forwarder.reordered <= 40


def test_a_rate_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="duplicate_rate"):
        Faults(duplicate_rate=1.5)


def test_reordering_puts_some_items_later_change_first_on_its_shard(
    dynamodb: Any, streams: Any, kinesis: Any, table: TableDescription, target: str
) -> None:
    _put_items(dynamodb, table, 200, users=2)  # two items, a hundred changes each, interleaved
    forwarder = _forwarder(streams, kinesis, table, target, faults=Faults(reorder_rate=0.2, seed=3))
    forwarder.forward_available()
    numbers_of: dict[str, list[int]] = {}
    for _, envelope, key in _kinesis_records(kinesis, target):
        numbers_of.setdefault(key, []).append(int(envelope["dynamodb"]["NewImage"]["n"]["N"]))
    assert sorted(n for numbers in numbers_of.values() for n in numbers) == list(range(200))
    assert any(numbers != sorted(numbers) for numbers in numbers_of.values())

"""The local stack's Kinesis resharding (devstack._moto_patches.install_kinesis_resharding): after a split
or a merge the parents keep their records and end, the children receive the later puts, and no record
is moved or copied, as Kinesis does it."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from devstack.streams import read_kinesis_stream


@pytest.fixture
def kinesis(moto_endpoint: str) -> Any:
    return boto3.client(
        "kinesis",
        endpoint_url=moto_endpoint,
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _stream(kinesis: Any, shards: int) -> str:
    name = f"reshard-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    return name


def _put(kinesis: Any, name: str, labels: range) -> dict[str, str]:
    """Put one record per label (partition key = label); the shard each went to."""
    return {
        str(label): kinesis.put_record(StreamName=name, Data=str(label).encode(), PartitionKey=f"k{label}")[
            "ShardId"
        ]
        for label in labels
    }


def _shards(kinesis: Any, name: str) -> dict[str, dict[str, Any]]:
    return {shard["ShardId"]: shard for shard in kinesis.list_shards(StreamName=name)["Shards"]}


def _read(kinesis: Any, name: str, shard_id: str) -> tuple[list[str], bool]:
    """Every record of the shard from its start, and whether the shard ended (no next iterator)."""
    data, children = _read_to_end(kinesis, name, shard_id)
    return data, children is not None


def _read_to_end(kinesis: Any, name: str, shard_id: str) -> tuple[list[str], list[dict[str, Any]] | None]:
    """Every record of the shard from its start, and the children the read's end named (None: the
    shard did not end)."""
    iterator = kinesis.get_shard_iterator(
        StreamName=name, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    data: list[str] = []
    for _ in range(100):
        page = kinesis.get_records(ShardIterator=iterator)
        data.extend(record["Data"].decode() for record in page["Records"])
        iterator = page.get("NextShardIterator")
        if iterator is None:
            return data, page.get("ChildShards", [])
        if not page["Records"]:
            return data, None
    raise AssertionError("the shard kept answering records")


def _split_first(kinesis: Any, name: str) -> tuple[str, list[str]]:
    parent = next(iter(_shards(kinesis, name).values()))
    low, high = (int(parent["HashKeyRange"][key]) for key in ("StartingHashKey", "EndingHashKey"))
    kinesis.split_shard(
        StreamName=name, ShardToSplit=parent["ShardId"], NewStartingHashKey=str((low + high) // 2)
    )
    children = [
        shard
        for shard, about in _shards(kinesis, name).items()
        if about.get("ParentShardId") == parent["ShardId"]
    ]
    return parent["ShardId"], children


def test_a_split_parent_keeps_its_records_and_ends(kinesis: Any) -> None:
    name = _stream(kinesis, 2)
    before = _put(kinesis, name, range(20))
    parent, _ = _split_first(kinesis, name)
    _put(kinesis, name, range(20, 40))
    data, ended = _read(kinesis, name, parent)
    assert data == [label for label, shard in before.items() if shard == parent]
    assert ended


def test_a_split_parents_end_names_its_children_as_kinesis_does(kinesis: Any) -> None:
    name = _stream(kinesis, 2)
    parent, children = _split_first(kinesis, name)
    _, named = _read_to_end(kinesis, name, parent)
    shards = _shards(kinesis, name)
    assert named == [
        {"ShardId": child, "ParentShards": [parent], "HashKeyRange": shards[child]["HashKeyRange"]}
        for child in children
    ]


def test_a_merged_pairs_ends_name_the_one_child_with_both_parents(kinesis: Any) -> None:
    name = _stream(kinesis, 2)
    lower, upper = sorted(_shards(kinesis, name))
    kinesis.merge_shards(StreamName=name, ShardToMerge=lower, AdjacentShardToMerge=upper)
    (child,) = set(_shards(kinesis, name)) - {lower, upper}
    for parent in (lower, upper):
        _, named = _read_to_end(kinesis, name, parent)
        assert named is not None
        assert [(shard["ShardId"], shard["ParentShards"]) for shard in named] == [(child, [lower, upper])]


def test_puts_after_a_split_go_to_the_children_by_their_hash_ranges(kinesis: Any) -> None:
    name = _stream(kinesis, 2)
    _put(kinesis, name, range(20))
    parent, children = _split_first(kinesis, name)
    after = _put(kinesis, name, range(20, 60))
    assert parent not in after.values()
    assert set(children) <= set(after.values())
    for child in children:
        data, ended = _read(kinesis, name, child)
        assert data == [label for label, shard in after.items() if shard == child]
        assert not ended


def test_a_merge_copies_no_record_and_its_child_takes_the_later_puts(kinesis: Any) -> None:
    name = _stream(kinesis, 2)
    before = _put(kinesis, name, range(20))
    lower, upper = sorted(_shards(kinesis, name))
    kinesis.merge_shards(StreamName=name, ShardToMerge=lower, AdjacentShardToMerge=upper)
    (child,) = set(_shards(kinesis, name)) - {lower, upper}
    after = _put(kinesis, name, range(20, 40))
    assert set(after.values()) == {child}
    assert _read(kinesis, name, child) == ([str(label) for label in range(20, 40)], False)
    for parent in (lower, upper):
        assert _read(kinesis, name, parent) == (
            [label for label, shard in before.items() if shard == parent],
            True,
        )
    every = [record["Data"].decode() for _, record in read_kinesis_stream(kinesis, name)]
    assert sorted(every) == sorted(str(label) for label in range(40))

"""devstack/streams.py: a stream read back whole, in order, each record with its shard."""

from __future__ import annotations

from typing import Any

from devstack.streams import read_stream, read_stream_by_shard
from pipeline.tables import create_table
from tests.support.dynamodb import unique_table_name


def test_every_record_comes_back_in_write_order_with_its_shard(dynamodb: Any, streams: Any) -> None:
    table = create_table(dynamodb, unique_table_name())
    for n in range(3):
        dynamodb.put_item(TableName=table.table_name, Item={"pk": {"S": f"USER#{n}"}, "sk": {"S": "X"}})
    [shard] = streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"]
    read = list(read_stream_by_shard(streams, table.stream_arn))
    assert [(shard_id, record["dynamodb"]["Keys"]["pk"]["S"]) for shard_id, record in read] == [
        (shard["ShardId"], "USER#0"),
        (shard["ShardId"], "USER#1"),
        (shard["ShardId"], "USER#2"),
    ]
    assert read_stream(streams, table.stream_arn) == [record for _, record in read]


def test_a_stream_with_no_record_reads_as_empty(dynamodb: Any, streams: Any) -> None:
    table = create_table(dynamodb, unique_table_name())
    assert read_stream(streams, table.stream_arn) == []

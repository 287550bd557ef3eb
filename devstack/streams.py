"""Reading a DynamoDB stream back whole on the local stack (moto: one shard that never closes): what the
benches, the tests and the demo check the consumer against.

    records = read_stream(streams_client, stream_arn)  # every record, from the trim horizon, in order
"""

from __future__ import annotations

__all__ = ["read_kinesis_stream", "read_stream", "read_stream_by_shard"]

from collections.abc import Iterator
from typing import Any

_PAGE = 1000  # GetRecords' largest page


def read_stream_by_shard(streams: Any, stream_arn: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(shard id, record) for every record the stream holds, shard by shard from the trim horizon, as
    boto3 returns them; a shard ends at its first empty page (moto's open shard has no end of its own)."""
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=_PAGE)
            if not page["Records"]:
                break
            for record in page["Records"]:
                yield shard["ShardId"], record
            iterator = page.get("NextShardIterator")


def read_kinesis_stream(kinesis: Any, stream_name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(shard id, record) for every record a Kinesis stream holds, shard by shard from the trim horizon,
    as boto3 returns them; a shard ends at its first empty page, as above."""
    for shard in kinesis.list_shards(StreamName=stream_name)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream_name, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = kinesis.get_records(ShardIterator=iterator, Limit=_PAGE)
            if not page["Records"]:
                break
            for record in page["Records"]:
                yield shard["ShardId"], record
            iterator = page.get("NextShardIterator")


def read_stream(streams: Any, stream_arn: str) -> list[dict[str, Any]]:
    """Every record the stream holds, in stream order (see `read_stream_by_shard`)."""
    return [record for _, record in read_stream_by_shard(streams, stream_arn)]

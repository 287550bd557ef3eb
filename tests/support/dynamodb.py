"""DynamoDB helpers for tests against the session moto server: clients, fresh tables, stream reads."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import boto3
from botocore.config import Config

REGION = "eu-west-1"


def client(endpoint: str, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),
    )


def unique_table_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class FixedClock:
    """A clock that says what it is told."""

    def __init__(self, now: datetime) -> None:
        self.current = now

    def now(self) -> datetime:
        return self.current


def read_stream(streams: Any, stream_arn: str) -> list[dict[str, Any]]:
    """Every record on the table's (single) shard, from the trim horizon, as boto3 returns them."""
    shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    records: list[dict[str, Any]] = []
    for shard in shards:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            if not page["Records"]:
                break
            records.extend(page["Records"])
            iterator = page.get("NextShardIterator")
    return records


def get_item(dynamodb: Any, table_name: str, pk: str, sk: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = dynamodb.get_item(
        TableName=table_name, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
    ).get("Item")
    return item


def items_of(dynamodb: Any, table_name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table_name, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

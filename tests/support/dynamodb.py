"""DynamoDB helpers for tests against the session moto server: clients, fresh tables, stream reads."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import boto3
from botocore.config import Config

from devstack.streams import read_stream  # noqa: F401  (the tests import it from here)

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

"""Table administration: make the entitlements table as the contract in `schema.table` describes it.

`create_table` makes the table (pk/sk strings, on-demand billing), its GSI1 index (gsi1pk/gsi1sk, every
attribute projected; only entitlement rows carry the gsi1 attributes, so only they appear in it), a
NEW_AND_OLD_IMAGES stream and TTL on `ttl`. It is idempotent: on an existing table it checks the key schema
and adds what is missing (the index, the stream, TTL), so it can be run against any endpoint, any number of
times. `stream_arn_for` finds the table's current stream.

Clients are passed in (typed as the small Protocols below; boto3 clients satisfy them). boto3 and botocore
errors are converted once, here, into `schema.errors` types carrying only the operation and error code.
"""

from __future__ import annotations

__all__ = [
    "TABLE_ATTRIBUTE_DEFINITIONS",
    "TABLE_KEY_SCHEMA",
    "TableContractMismatch",
    "TableDescription",
    "create_table",
    "enable_kinesis_destination",
    "kinesis_precision",
    "stream_arn_for",
]

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from schema.aws_errors import converted
from schema.errors import RetryableError, TerminalError
from schema.table import GSI1_NAME, PK, SK, TTL_ATTRIBUTE

_log = logging.getLogger(__name__)

GSI1_PK = "gsi1pk"
GSI1_SK = "gsi1sk"
STREAM_VIEW_TYPE = "NEW_AND_OLD_IMAGES"

TABLE_KEY_SCHEMA: tuple[dict[str, str], ...] = (
    {"AttributeName": PK, "KeyType": "HASH"},
    {"AttributeName": SK, "KeyType": "RANGE"},
)
_GSI1_KEY_SCHEMA: tuple[dict[str, str], ...] = (
    {"AttributeName": GSI1_PK, "KeyType": "HASH"},
    {"AttributeName": GSI1_SK, "KeyType": "RANGE"},
)
TABLE_ATTRIBUTE_DEFINITIONS: tuple[dict[str, str], ...] = tuple(
    {"AttributeName": name, "AttributeType": "S"} for name in (PK, SK, GSI1_PK, GSI1_SK)
)


class DynamoDBAdminClient(Protocol):
    """The DynamoDB control-plane calls `create_table` makes (a boto3 `dynamodb` client has them)."""

    def create_table(self, **kwargs: Any) -> dict[str, Any]: ...
    def describe_table(self, **kwargs: Any) -> dict[str, Any]: ...
    def update_table(self, **kwargs: Any) -> dict[str, Any]: ...
    def describe_time_to_live(self, **kwargs: Any) -> dict[str, Any]: ...
    def update_time_to_live(self, **kwargs: Any) -> dict[str, Any]: ...


@runtime_checkable
class _DescribesTables(Protocol):
    def describe_table(self, **kwargs: Any) -> dict[str, Any]: ...


@runtime_checkable
class _ListsStreams(Protocol):
    def list_streams(self, **kwargs: Any) -> dict[str, Any]: ...


class TableContractMismatch(TerminalError):
    """An existing table cannot be brought to the contract (its key schema or stream view differs)."""


@dataclass(frozen=True, slots=True)
class TableDescription:
    table_name: str
    table_arn: str
    stream_arn: str
    created: bool  # False when the table already existed


def _gsi1_definition() -> dict[str, Any]:
    return {
        "IndexName": GSI1_NAME,
        "KeySchema": [dict(k) for k in _GSI1_KEY_SCHEMA],
        "Projection": {"ProjectionType": "ALL"},
    }


def _wait_until_active(
    client: DynamoDBAdminClient,
    table_name: str,
    *,
    timeout_seconds: float,
    sleep: Callable[[float], None],
) -> dict[str, Any]:
    """Poll until the table and every index are ACTIVE; return the table description."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        with converted("DynamoDB DescribeTable"):
            table: dict[str, Any] = client.describe_table(TableName=table_name)["Table"]
        indexes = table.get("GlobalSecondaryIndexes", [])
        if table.get("TableStatus") == "ACTIVE" and all(i.get("IndexStatus") == "ACTIVE" for i in indexes):
            return table
        if time.monotonic() >= deadline:
            raise RetryableError("DynamoDB table did not become ACTIVE in time")
        sleep(1.0)


def _ensure_contract(client: DynamoDBAdminClient, table_name: str, table: dict[str, Any]) -> bool:
    """Bring an existing table to the contract. Returns True when it changed anything."""
    keys = [{"AttributeName": k["AttributeName"], "KeyType": k["KeyType"]} for k in table["KeySchema"]]
    if keys != [dict(k) for k in TABLE_KEY_SCHEMA]:
        raise TableContractMismatch("existing table has a different key schema")
    changed = False
    index_names = {i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])}
    if GSI1_NAME not in index_names:
        with converted("DynamoDB UpdateTable"):
            client.update_table(
                TableName=table_name,
                AttributeDefinitions=[dict(a) for a in TABLE_ATTRIBUTE_DEFINITIONS],
                GlobalSecondaryIndexUpdates=[{"Create": _gsi1_definition()}],
            )
        changed = True
    stream = table.get("StreamSpecification") or {}
    if not stream.get("StreamEnabled"):
        with converted("DynamoDB UpdateTable"):
            client.update_table(
                TableName=table_name,
                StreamSpecification={"StreamEnabled": True, "StreamViewType": STREAM_VIEW_TYPE},
            )
        changed = True
    elif stream.get("StreamViewType") != STREAM_VIEW_TYPE:
        raise TableContractMismatch("existing table streams a different view type")
    return changed


def _ensure_ttl(client: DynamoDBAdminClient, table_name: str) -> None:
    with converted("DynamoDB DescribeTimeToLive"):
        ttl = client.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]
    status = ttl.get("TimeToLiveStatus")
    attribute = ttl.get("AttributeName")
    if status in ("ENABLED", "ENABLING"):
        if attribute != TTL_ATTRIBUTE:
            raise TableContractMismatch("existing table has TTL on a different attribute")
        return
    with converted("DynamoDB UpdateTimeToLive"):
        client.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
        )


def create_table(
    dynamodb_client: DynamoDBAdminClient,
    table_name: str,
    *,
    timeout_seconds: float = 300.0,
    sleep: Callable[[float], None] = time.sleep,
) -> TableDescription:
    """Make the entitlements table (or bring an existing one to the contract) and return where it is."""
    with converted("DynamoDB CreateTable", tolerate=frozenset({"ResourceInUseException"})) as existed:
        dynamodb_client.create_table(
            TableName=table_name,
            KeySchema=[dict(k) for k in TABLE_KEY_SCHEMA],
            AttributeDefinitions=[dict(a) for a in TABLE_ATTRIBUTE_DEFINITIONS],
            BillingMode="PAY_PER_REQUEST",
            GlobalSecondaryIndexes=[_gsi1_definition()],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": STREAM_VIEW_TYPE},
        )
    created = not existed
    table = _wait_until_active(dynamodb_client, table_name, timeout_seconds=timeout_seconds, sleep=sleep)
    if not created and _ensure_contract(dynamodb_client, table_name, table):
        table = _wait_until_active(dynamodb_client, table_name, timeout_seconds=timeout_seconds, sleep=sleep)
    _ensure_ttl(dynamodb_client, table_name)
    stream_arn = table.get("LatestStreamArn")
    if not stream_arn:
        raise TableContractMismatch("table has no stream after creation")
    _log.info("table ready", extra={"table_created": created})
    return TableDescription(
        table_name=table_name, table_arn=str(table["TableArn"]), stream_arn=str(stream_arn), created=created
    )


# What a Kinesis destination's time is counted in (EnableKinesisStreamingConfiguration); AWS's default.
KINESIS_PRECISIONS = ("MICROSECOND", "MILLISECOND")
_LIVE_DESTINATION = frozenset({"ENABLING", "ACTIVE", "UPDATING"})


def kinesis_precision(value: str) -> str:
    """`value` when it names a precision Kinesis destinations take; else `TerminalError` (one line)."""
    if value not in KINESIS_PRECISIONS:
        raise TerminalError(f"precision must be one of {', '.join(KINESIS_PRECISIONS)}")
    return value


def enable_kinesis_destination(
    client: Any, table_name: str, kinesis_stream_arn: str, *, precision: str = "MICROSECOND"
) -> str:
    """Stream the table's changes to a Kinesis data stream as well (Kinesis Data Streams for DynamoDB),
    with the creation time's precision; idempotent: a destination already live for that stream is kept,
    its precision updated when it differs. Returns what was done: `enabled`, `updated` or `unchanged`.

    `client` is `Any`: a boto3 `dynamodb` client (moto lacks these calls; botocore's Stubber tests them)."""
    precision = kinesis_precision(precision)
    with converted("DynamoDB DescribeKinesisStreamingDestination"):
        described = client.describe_kinesis_streaming_destination(TableName=table_name)
    action = "Enable"
    for destination in described.get("KinesisDataStreamDestinations", []):
        if destination.get("StreamArn") != kinesis_stream_arn:
            continue
        if destination.get("DestinationStatus") not in _LIVE_DESTINATION:
            break  # disabled or failed: enable it again
        # A destination enabled before precisions existed reports none: it counts in milliseconds.
        if destination.get("ApproximateCreationDateTimePrecision", "MILLISECOND") == precision:
            return "unchanged"
        action = "Update"
        break
    # EnableKinesisStreamingDestination and UpdateKinesisStreamingDestination take the same arguments
    # but for the configuration's name.
    with converted(f"DynamoDB {action}KinesisStreamingDestination"):
        getattr(client, f"{action.lower()}_kinesis_streaming_destination")(
            TableName=table_name,
            StreamArn=kinesis_stream_arn,
            **{f"{action}KinesisStreamingConfiguration": {"ApproximateCreationDateTimePrecision": precision}},
        )
    _log.info("kinesis destination set", extra={"action": action.lower()})
    return "updated" if action == "Update" else "enabled"


def stream_arn_for(table_name: str, client: Any) -> str:
    """The table's current stream ARN, through a `dynamodb` client (DescribeTable) or a
    `dynamodbstreams` client (ListStreams, the newest label winning).

    `client` is `Any` because either boto3 client will do; it is told apart by the calls it offers.
    """
    if isinstance(client, _DescribesTables):
        with converted("DynamoDB DescribeTable"):
            table = client.describe_table(TableName=table_name)["Table"]
        arn = table.get("LatestStreamArn")
        if not arn or not (table.get("StreamSpecification") or {}).get("StreamEnabled"):
            raise TerminalError("table has no enabled stream")
        return str(arn)
    if isinstance(client, _ListsStreams):
        streams: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": table_name}
        while True:
            with converted("DynamoDB ListStreams"):
                page = client.list_streams(**kwargs)
            streams.extend(page.get("Streams", []))
            last = page.get("LastEvaluatedStreamArn")
            if not last:
                break
            kwargs["ExclusiveStartStreamArn"] = last
        mine = [s for s in streams if s.get("TableName") == table_name]
        if not mine:
            raise TerminalError("table has no stream")
        return str(max(mine, key=lambda s: str(s.get("StreamLabel", "")))["StreamArn"])
    raise TypeError("client must offer describe_table (dynamodb) or list_streams (dynamodbstreams)")

"""pipeline/tables.py's Kinesis destination (Kinesis Data Streams for DynamoDB). moto lacks the
streaming-destination calls, so botocore's Stubber stands in for DynamoDB and checks each request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from pipeline.tables import enable_kinesis_destination
from schema.errors import TerminalError

TABLE = "entitlements"
STREAM = "arn:aws:kinesis:eu-west-1:123456789012:stream/entitlements-changes"
PRECISION = "ApproximateCreationDateTimePrecision"


@pytest.fixture
def stubbed() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client(
        "dynamodb", region_name="eu-west-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _described(stubber: Stubber, *destinations: dict[str, str]) -> None:
    stubber.add_response(
        "describe_kinesis_streaming_destination",
        {"TableName": TABLE, "KinesisDataStreamDestinations": list(destinations)},
        {"TableName": TABLE},
    )


def _live(precision: str) -> dict[str, str]:
    return {"StreamArn": STREAM, "DestinationStatus": "ACTIVE", PRECISION: precision}


def _expect(stubber: Stubber, action: str, precision: str) -> None:
    """The Enable or Update call the function must make next, with exactly these arguments."""
    stubber.add_response(
        f"{action.lower()}_kinesis_streaming_destination",
        {"TableName": TABLE, "StreamArn": STREAM, "DestinationStatus": "ENABLING"},
        {
            "TableName": TABLE,
            "StreamArn": STREAM,
            f"{action}KinesisStreamingConfiguration": {PRECISION: precision},
        },
    )


def test_a_table_without_the_destination_gets_it_with_the_precision(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    _described(stubber)
    _expect(stubber, "Enable", "MICROSECOND")
    assert enable_kinesis_destination(client, TABLE, STREAM) == "enabled"


def test_a_live_destination_with_the_same_precision_is_left_as_it_is(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    _described(stubber, _live("MILLISECOND"))
    assert enable_kinesis_destination(client, TABLE, STREAM, precision="MILLISECOND") == "unchanged"


def test_a_live_destination_with_another_precision_is_updated(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    _described(stubber, _live("MILLISECOND"))
    _expect(stubber, "Update", "MICROSECOND")
    assert enable_kinesis_destination(client, TABLE, STREAM) == "updated"


def test_a_disabled_destination_is_enabled_again(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    _described(stubber, {"StreamArn": STREAM, "DestinationStatus": "DISABLED"})
    _expect(stubber, "Enable", "MILLISECOND")
    assert enable_kinesis_destination(client, TABLE, STREAM, precision="MILLISECOND") == "enabled"


def test_an_unknown_precision_is_refused_before_any_call(stubbed: tuple[Any, Stubber]) -> None:
    client, _ = stubbed
    with pytest.raises(TerminalError, match="MICROSECOND, MILLISECOND"):
        enable_kinesis_destination(client, TABLE, STREAM, precision="SECOND")

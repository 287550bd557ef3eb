"""The TTL emulator deletes what AWS's TTL would, and marks its deletions as AWS does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from devstack import _moto_patches
from devstack.ttl_emulator import (
    TTL_IDENTITY,
    TtlEmulator,
    check_moto_supported,
    ttl_expired,
)
from pipeline.tables import TableDescription, create_table
from schema.clock import SimulatedClock
from tests.support.dynamodb import FixedClock, get_item, read_stream, unique_table_name

NOW = datetime(2030, 6, 1, tzinfo=UTC)
NOW_EPOCH = int(NOW.timestamp())


def put(dynamodb: Any, table: TableDescription, sk: str, ttl: dict[str, str] | None) -> None:
    item: dict[str, Any] = {"pk": {"S": "USER#ttl"}, "sk": {"S": sk}}
    if ttl is not None:
        item["ttl"] = ttl
    dynamodb.put_item(TableName=table.table_name, Item=item)


def emulate(table: TableDescription, now: datetime = NOW) -> int:
    return TtlEmulator(FixedClock(now), table_names=[table.table_name]).run_once()


def exists(dynamodb: Any, table: TableDescription, sk: str) -> bool:
    return get_item(dynamodb, table.table_name, "USER#ttl", sk) is not None


def test_an_expired_number_ttl_is_deleted(dynamodb: Any, table: TableDescription) -> None:
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str(NOW_EPOCH - 1)})
    emulate(table)
    assert not exists(dynamodb, table, "CLEANUP#STALE#a")


def test_a_ttl_equal_to_now_is_kept_until_it_has_passed(dynamodb: Any, table: TableDescription) -> None:
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str(NOW_EPOCH)})
    emulate(table)
    assert exists(dynamodb, table, "CLEANUP#STALE#a")


def test_a_future_number_ttl_is_kept(dynamodb: Any, table: TableDescription) -> None:
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str(NOW_EPOCH + 3600)})
    emulate(table)
    assert exists(dynamodb, table, "CLEANUP#STALE#a")


def test_a_string_ttl_is_kept_even_when_its_text_has_passed(dynamodb: Any, table: TableDescription) -> None:
    put(dynamodb, table, "CLEANUP#CANCELLATION", {"S": str(NOW_EPOCH - 3600)})
    emulate(table)
    assert exists(dynamodb, table, "CLEANUP#CANCELLATION")


def test_a_millisecond_ttl_is_kept(dynamodb: Any, table: TableDescription) -> None:
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str((NOW_EPOCH - 3600) * 1000)})
    emulate(table)
    assert exists(dynamodb, table, "CLEANUP#STALE#a")


def test_a_ttl_more_than_five_years_past_is_kept(dynamodb: Any, table: TableDescription) -> None:
    six_years_ago = NOW - timedelta(days=6 * 365)
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str(int(six_years_ago.timestamp()))})
    emulate(table)
    assert exists(dynamodb, table, "CLEANUP#STALE#a")


def test_a_ttl_less_than_five_years_past_is_deleted(dynamodb: Any, table: TableDescription) -> None:
    four_years_ago = NOW - timedelta(days=4 * 365)
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str(int(four_years_ago.timestamp()))})
    emulate(table)
    assert not exists(dynamodb, table, "CLEANUP#STALE#a")


def test_a_fractional_number_ttl_is_kept(dynamodb: Any, table: TableDescription) -> None:
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": f"{NOW_EPOCH - 3600}.5"})
    emulate(table)
    assert exists(dynamodb, table, "CLEANUP#STALE#a")


def test_an_item_without_ttl_is_kept(dynamodb: Any, table: TableDescription) -> None:
    put(dynamodb, table, "ENTITLEMENT#a", None)
    emulate(table)
    assert exists(dynamodb, table, "ENTITLEMENT#a")


def test_a_table_without_ttl_enabled_is_left_alone(dynamodb: Any) -> None:
    name = unique_table_name("nottl")
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.put_item(
        TableName=name,
        Item={"pk": {"S": "USER#ttl"}, "sk": {"S": "x"}, "ttl": {"N": str(NOW_EPOCH - 10)}},
    )
    TtlEmulator(FixedClock(NOW), table_names=[name]).run_once()
    assert get_item(dynamodb, name, "USER#ttl", "x") is not None


def test_a_table_without_a_range_key_is_emulated_too(dynamodb: Any) -> None:
    name = unique_table_name("hashonly")
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"}
    )
    dynamodb.put_item(TableName=name, Item={"pk": {"S": "k"}, "exp": {"N": str(NOW_EPOCH - 10)}})
    TtlEmulator(FixedClock(NOW), table_names=[name]).run_once()
    assert "Item" not in dynamodb.get_item(TableName=name, Key={"pk": {"S": "k"}})


def test_expiry_is_judged_by_the_shared_simulated_clock(dynamodb: Any, table: TableDescription) -> None:
    real_now = datetime.now(UTC)
    sixty_three_days = int((real_now + timedelta(days=63)).timestamp())
    put(dynamodb, table, "CLEANUP#CANCELLATION", {"N": str(sixty_three_days)})
    simulated = SimulatedClock(start=real_now + timedelta(days=64), anchor=real_now, speed=1.0)
    TtlEmulator(simulated, table_names=[table.table_name]).run_once()
    assert not exists(dynamodb, table, "CLEANUP#CANCELLATION")


def test_a_ttl_deletion_reaches_get_records_as_remove_with_the_service_identity(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str(NOW_EPOCH - 1)})
    emulate(table)
    removal = read_stream(streams, table.stream_arn)[-1]
    assert (removal["eventName"], removal["userIdentity"]) == (
        "REMOVE",
        {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"},
    )


def test_a_service_delete_reaches_get_records_without_an_identity(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    put(dynamodb, table, "CLEANUP#CANCELLATION", {"N": str(NOW_EPOCH + 3600)})
    dynamodb.delete_item(
        TableName=table.table_name, Key={"pk": {"S": "USER#ttl"}, "sk": {"S": "CLEANUP#CANCELLATION"}}
    )
    removal = read_stream(streams, table.stream_arn)[-1]
    assert removal["eventName"] == "REMOVE"
    assert "userIdentity" not in removal


def test_writes_around_a_ttl_deletion_carry_no_identity(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str(NOW_EPOCH - 1)})
    emulate(table)
    put(dynamodb, table, "CLEANUP#STALE#b", {"N": str(NOW_EPOCH + 3600)})
    records = read_stream(streams, table.stream_arn)
    assert ["userIdentity" in r for r in records] == [False, True, False]


def test_the_ttl_identity_is_on_the_wire_in_the_api_shape_the_java_sdk_reads(
    moto_endpoint: str, dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str(NOW_EPOCH - 1)})
    emulate(table)
    shard = streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=table.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    response = httpx.post(
        moto_endpoint,
        headers={
            "X-Amz-Target": "DynamoDBStreams_20120810.GetRecords",
            "Content-Type": "application/x-amz-json-1.0",
            "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20300601/eu-west-1/dynamodb/aws4_request, "
            "SignedHeaders=host, Signature=0",
        },
        content=json.dumps({"ShardIterator": iterator}),
    )
    wire = response.json()["Records"]
    assert wire[-1]["userIdentity"] == TTL_IDENTITY


def test_a_pass_reports_how_many_items_it_deleted(dynamodb: Any, table: TableDescription) -> None:
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str(NOW_EPOCH - 1)})
    put(dynamodb, table, "CLEANUP#STALE#b", {"N": str(NOW_EPOCH - 2)})
    put(dynamodb, table, "CLEANUP#STALE#c", {"S": str(NOW_EPOCH - 2)})
    assert emulate(table) == 2


def test_every_table_with_ttl_is_scanned_when_none_is_named(dynamodb: Any) -> None:
    tables = [create_table(dynamodb, unique_table_name("all")) for _ in range(2)]
    for description in tables:
        put(dynamodb, description, "CLEANUP#STALE#a", {"N": "1"})  # 1970: more than five years past
        put(dynamodb, description, "CLEANUP#STALE#b", {"N": str(NOW_EPOCH - 1)})
    # A clock at the epoch's second 2: only the ttl of 1 has passed, and nothing else anywhere has.
    TtlEmulator(FixedClock(datetime.fromtimestamp(2, UTC))).run_once()
    assert [exists(dynamodb, d, "CLEANUP#STALE#a") for d in tables] == [False, False]


def test_after_the_first_pass_a_pass_reads_only_what_is_due_not_the_table(
    dynamodb: Any, table: TableDescription, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(dynamodb, table, "CLEANUP#LATER#a", {"N": str(NOW_EPOCH + 3600)})
    emulate(table)  # builds the table's index with one scan

    def no_scan(table: object) -> list[object]:
        raise AssertionError("the pass scanned the table")

    monkeypatch.setattr(_moto_patches, "_table_items", no_scan)
    put(dynamodb, table, "CLEANUP#STALE#a", {"N": str(NOW_EPOCH - 1)})
    assert (emulate(table), exists(dynamodb, table, "CLEANUP#LATER#a")) == (1, True)


def test_an_item_whose_ttl_moved_later_is_kept_when_its_old_time_passes(
    dynamodb: Any, table: TableDescription
) -> None:
    put(dynamodb, table, "CLEANUP#MOVED#a", {"N": str(NOW_EPOCH + 60)})
    emulate(table)
    dynamodb.update_item(
        TableName=table.table_name,
        Key={"pk": {"S": "USER#ttl"}, "sk": {"S": "CLEANUP#MOVED#a"}},
        UpdateExpression="SET #ttl = :later",
        ExpressionAttributeNames={"#ttl": "ttl"},
        ExpressionAttributeValues={":later": {"N": str(NOW_EPOCH + 3600)}},
    )
    emulate(table, NOW + timedelta(seconds=120))
    kept = exists(dynamodb, table, "CLEANUP#MOVED#a")
    emulate(table, NOW + timedelta(seconds=3601))
    assert (kept, exists(dynamodb, table, "CLEANUP#MOVED#a")) == (True, False)


def test_a_ttl_set_by_an_update_after_the_first_pass_is_expired(
    dynamodb: Any, table: TableDescription
) -> None:
    put(dynamodb, table, "CLEANUP#UPDATED#a", None)
    emulate(table)
    dynamodb.update_item(
        TableName=table.table_name,
        Key={"pk": {"S": "USER#ttl"}, "sk": {"S": "CLEANUP#UPDATED#a"}},
        UpdateExpression="SET #ttl = :past",
        ExpressionAttributeNames={"#ttl": "ttl"},
        ExpressionAttributeValues={":past": {"N": str(NOW_EPOCH - 1)}},
    )
    emulate(table)
    assert not exists(dynamodb, table, "CLEANUP#UPDATED#a")


def test_a_ttl_written_in_a_transaction_after_the_first_pass_is_expired(
    dynamodb: Any, table: TableDescription
) -> None:
    emulate(table)
    dynamodb.transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": table.table_name,
                    "Item": {
                        "pk": {"S": "USER#ttl"},
                        "sk": {"S": "CLEANUP#TX#a"},
                        "ttl": {"N": str(NOW_EPOCH - 1)},
                    },
                }
            }
        ]
    )
    emulate(table)
    assert not exists(dynamodb, table, "CLEANUP#TX#a")


def test_an_item_deleted_by_the_api_before_its_ttl_passes_is_not_counted(
    dynamodb: Any, table: TableDescription
) -> None:
    put(dynamodb, table, "CLEANUP#GONE#a", {"N": str(NOW_EPOCH + 60)})
    emulate(table)
    dynamodb.delete_item(
        TableName=table.table_name, Key={"pk": {"S": "USER#ttl"}, "sk": {"S": "CLEANUP#GONE#a"}}
    )
    assert emulate(table, NOW + timedelta(seconds=120)) == 0


def test_the_pinned_moto_is_supported() -> None:
    check_moto_supported()


@given(st.text(max_size=20))
def test_a_string_attribute_is_never_expired(text: str) -> None:
    assert not ttl_expired({"S": text}, NOW_EPOCH)


@given(st.integers(min_value=NOW_EPOCH - 10**8, max_value=NOW_EPOCH + 10**8))
def test_a_millisecond_value_of_any_nearby_time_is_never_expired(seconds: int) -> None:
    assert not ttl_expired({"N": str(seconds * 1000)}, NOW_EPOCH)


@given(st.integers(min_value=1, max_value=5 * 365 * 86400))
def test_any_integral_number_within_five_years_past_is_expired(age: int) -> None:
    assert ttl_expired({"N": str(NOW_EPOCH - age)}, NOW_EPOCH)


@pytest.mark.parametrize(
    "attribute", [None, {}, {"NULL": True}, {"N": "abc"}, {"N": "NaN"}, {"N": 5}, {"SS": ["1"]}]
)
def test_malformed_or_non_number_attributes_are_never_expired(attribute: dict[str, Any] | None) -> None:
    assert not ttl_expired(attribute, NOW_EPOCH)

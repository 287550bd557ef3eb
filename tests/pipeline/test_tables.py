"""`pipeline.tables`: the entitlements table made as the contract says, on any endpoint, idempotently."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from pipeline.tables import TableContractMismatch, create_table, stream_arn_for
from schema.errors import RetryableError, TerminalError
from tests.support.dynamodb import client, unique_table_name


def describe(dynamodb: Any, name: str) -> dict[str, Any]:
    table: dict[str, Any] = dynamodb.describe_table(TableName=name)["Table"]
    return table


def bare_table(dynamodb: Any, name: str, keys: tuple[str, ...] = ("pk", "sk")) -> None:
    kinds = ("HASH", "RANGE")
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": k, "KeyType": kind} for k, kind in zip(keys, kinds, strict=False)],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in keys],
        BillingMode="PAY_PER_REQUEST",
    )


def test_the_table_is_keyed_on_pk_and_sk(dynamodb: Any) -> None:
    name = unique_table_name()
    create_table(dynamodb, name)
    assert describe(dynamodb, name)["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]


def test_the_keys_are_strings(dynamodb: Any) -> None:
    name = unique_table_name()
    create_table(dynamodb, name)
    types = {a["AttributeName"]: a["AttributeType"] for a in describe(dynamodb, name)["AttributeDefinitions"]}
    assert types == {"pk": "S", "sk": "S", "gsi1pk": "S", "gsi1sk": "S"}


def test_the_table_bills_per_request(dynamodb: Any) -> None:
    name = unique_table_name()
    create_table(dynamodb, name)
    assert describe(dynamodb, name)["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"


def test_gsi1_is_keyed_on_gsi1pk_and_gsi1sk_and_projects_everything(dynamodb: Any) -> None:
    name = unique_table_name()
    create_table(dynamodb, name)
    (index,) = describe(dynamodb, name)["GlobalSecondaryIndexes"]
    assert (index["IndexName"], index["KeySchema"], index["Projection"]) == (
        "GSI1",
        [{"AttributeName": "gsi1pk", "KeyType": "HASH"}, {"AttributeName": "gsi1sk", "KeyType": "RANGE"}],
        {"ProjectionType": "ALL"},
    )


def test_the_stream_carries_new_and_old_images(dynamodb: Any) -> None:
    name = unique_table_name()
    create_table(dynamodb, name)
    assert describe(dynamodb, name)["StreamSpecification"] == {
        "StreamEnabled": True,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }


def test_ttl_is_enabled_on_the_ttl_attribute(dynamodb: Any) -> None:
    name = unique_table_name()
    create_table(dynamodb, name)
    ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "ttl")


def test_the_description_names_the_table_and_its_stream(dynamodb: Any) -> None:
    name = unique_table_name()
    made = create_table(dynamodb, name)
    table = describe(dynamodb, name)
    assert (made.table_name, made.table_arn, made.stream_arn, made.created) == (
        name,
        table["TableArn"],
        table["LatestStreamArn"],
        True,
    )


def test_creating_an_existing_table_reports_that_it_existed(dynamodb: Any) -> None:
    name = unique_table_name()
    first = create_table(dynamodb, name)
    again = create_table(dynamodb, name)
    assert (again.created, again.stream_arn) == (False, first.stream_arn)


def test_an_existing_table_keeps_its_items(dynamodb: Any) -> None:
    name = unique_table_name()
    create_table(dynamodb, name)
    dynamodb.put_item(TableName=name, Item={"pk": {"S": "USER#u"}, "sk": {"S": "ENTITLEMENT#a"}})
    create_table(dynamodb, name)
    assert dynamodb.scan(TableName=name)["Count"] == 1


def test_an_existing_bare_table_gets_the_index_the_stream_and_ttl(dynamodb: Any) -> None:
    name = unique_table_name()
    bare_table(dynamodb, name)
    create_table(dynamodb, name)
    table = describe(dynamodb, name)
    ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    assert (
        [i["IndexName"] for i in table["GlobalSecondaryIndexes"]],
        table["StreamSpecification"]["StreamViewType"],
        ttl["AttributeName"],
    ) == (["GSI1"], "NEW_AND_OLD_IMAGES", "ttl")


def test_an_existing_table_with_other_keys_is_refused(dynamodb: Any) -> None:
    name = unique_table_name()
    bare_table(dynamodb, name, keys=("id",))
    with pytest.raises(TableContractMismatch):
        create_table(dynamodb, name)


def test_an_existing_table_with_ttl_on_another_attribute_is_refused(dynamodb: Any) -> None:
    name = unique_table_name()
    bare_table(dynamodb, name)
    dynamodb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"}
    )
    with pytest.raises(TableContractMismatch):
        create_table(dynamodb, name)


def test_a_refused_table_is_a_terminal_error(dynamodb: Any) -> None:
    assert issubclass(TableContractMismatch, TerminalError)


def test_an_unreachable_endpoint_is_a_retryable_error() -> None:
    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(RetryableError):
        create_table(client(f"http://127.0.0.1:{port}", "dynamodb"), unique_table_name())


def test_a_missing_table_is_a_terminal_error_that_does_not_name_it(dynamodb: Any) -> None:
    name = unique_table_name("missing")
    with pytest.raises(TerminalError) as raised:
        stream_arn_for(name, dynamodb)
    assert (str(raised.value), name in str(raised.value)) == (
        "DynamoDB DescribeTable failed: ResourceNotFoundException",
        False,
    )


def test_the_stream_arn_is_found_through_dynamodb(dynamodb: Any) -> None:
    name = unique_table_name()
    made = create_table(dynamodb, name)
    assert stream_arn_for(name, dynamodb) == made.stream_arn


def test_the_stream_arn_is_found_through_dynamodb_streams(dynamodb: Any, streams: Any) -> None:
    name = unique_table_name()
    made = create_table(dynamodb, name)
    assert stream_arn_for(name, streams) == made.stream_arn


def test_a_table_without_a_stream_has_no_stream_arn(dynamodb: Any) -> None:
    name = unique_table_name()
    bare_table(dynamodb, name)
    with pytest.raises(TerminalError):
        stream_arn_for(name, dynamodb)


def test_a_client_of_another_service_is_refused() -> None:
    with pytest.raises(TypeError):
        stream_arn_for("entitlements", object())

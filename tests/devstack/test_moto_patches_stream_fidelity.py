"""Stream fidelity on the local stack (devstack._moto_patches.install_stream_fidelity): a put or update that
changes nothing writes no stream record, as DynamoDB Streams does not; every real change still does."""

from __future__ import annotations

from typing import Any

from moto.dynamodb.models.dynamo_type import DynamoType, Item

from devstack._moto_patches import item_unchanged
from pipeline.tables import TableDescription
from tests.support.dynamodb import read_stream

KEY = {"pk": {"S": "USER#u1"}, "sk": {"S": "ENTITLEMENT#a1"}}
ROW = {**KEY, "status": {"S": "Active"}, "n": {"N": "1"}, "tags": {"SS": ["a", "b"]}}


def _events(streams: Any, table: TableDescription) -> list[str]:
    return [record["eventName"] for record in read_stream(streams, table.stream_arn)]


def test_a_put_of_the_identical_item_writes_no_stream_record(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    dynamodb.put_item(TableName=table.table_name, Item=ROW)
    dynamodb.put_item(TableName=table.table_name, Item=ROW)
    assert _events(streams, table) == ["INSERT"]


def test_a_put_that_changes_a_value_writes_a_modify(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    dynamodb.put_item(TableName=table.table_name, Item=ROW)
    dynamodb.put_item(TableName=table.table_name, Item={**ROW, "status": {"S": "Superseded"}})
    assert _events(streams, table) == ["INSERT", "MODIFY"]


def test_a_put_that_drops_an_attribute_is_a_change(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    dynamodb.put_item(TableName=table.table_name, Item={**ROW, "ttl": {"N": "1900000000"}})
    dynamodb.put_item(TableName=table.table_name, Item=ROW)
    assert _events(streams, table) == ["INSERT", "MODIFY"]


def test_an_update_that_sets_the_values_already_held_writes_no_stream_record(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    dynamodb.put_item(TableName=table.table_name, Item=ROW)
    dynamodb.update_item(
        TableName=table.table_name,
        Key=KEY,
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "Active"}},
    )
    assert _events(streams, table) == ["INSERT"]


def test_an_update_that_changes_a_value_writes_a_modify(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    dynamodb.put_item(TableName=table.table_name, Item=ROW)
    dynamodb.update_item(
        TableName=table.table_name,
        Key=KEY,
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "Cancelled"}},
    )
    assert _events(streams, table) == ["INSERT", "MODIFY"]


def test_a_conditional_put_of_the_item_read_writes_no_stream_record(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    """SaveIfActive's successful write puts back exactly what was read: production sees no record."""
    dynamodb.put_item(TableName=table.table_name, Item=ROW)
    image = dynamodb.get_item(TableName=table.table_name, Key=KEY, ConsistentRead=True)["Item"]
    dynamodb.put_item(
        TableName=table.table_name,
        Item=image,
        ConditionExpression="attribute_exists(pk) AND #s = :a",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":a": {"S": "Active"}},
    )
    assert _events(streams, table) == ["INSERT"]


def test_in_a_transaction_only_the_items_that_change_write_records(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    other = {"pk": {"S": "USER#u1"}, "sk": {"S": "CLEANUP#CANCELLATION"}, "ttl": {"N": "1900000000"}}
    dynamodb.put_item(TableName=table.table_name, Item=ROW)
    dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table.table_name, "Item": ROW}},
            {"Put": {"TableName": table.table_name, "Item": other}},
        ]
    )
    assert _events(streams, table) == ["INSERT", "INSERT"]


def test_deletes_still_write_their_record(dynamodb: Any, streams: Any, table: TableDescription) -> None:
    dynamodb.put_item(TableName=table.table_name, Item=ROW)
    dynamodb.delete_item(TableName=table.table_name, Key=KEY)
    assert _events(streams, table) == ["INSERT", "REMOVE"]


def _item(attrs: dict[str, Any]) -> Item:
    return Item(DynamoType(KEY["pk"]), DynamoType(KEY["sk"]), {**KEY, **attrs})


def test_numbers_compare_by_value_and_sets_without_order() -> None:
    before = _item({"n": {"N": "1"}, "tags": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}})
    after = _item({"n": {"N": "1.0"}, "tags": {"SS": ["b", "a"]}, "ns": {"NS": ["2.00", "1"]}})
    assert item_unchanged(before, after)


def test_a_value_of_another_type_is_a_change() -> None:
    assert not item_unchanged(_item({"n": {"N": "1"}}), _item({"n": {"S": "1"}}))


def test_nested_maps_and_lists_compare_element_by_element() -> None:
    nested = {"m": {"M": {"l": {"L": [{"N": "1"}, {"S": "x"}]}}}}
    changed = {"m": {"M": {"l": {"L": [{"N": "1"}, {"S": "y"}]}}}}
    assert item_unchanged(_item(nested), _item(nested))
    assert not item_unchanged(_item(nested), _item(changed))


def test_an_insert_is_never_unchanged() -> None:
    assert not item_unchanged(None, _item({}))

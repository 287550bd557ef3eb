"""A Query of a table on the local stack reads the one partition it names
(devstack._moto_patches.install_query_cost): moto no longer sorts every item of the table for it, and
what a Query answers (items, order, pages, an index's answers) stays as moto answers it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from moto.dynamodb.models.table import Table

from pipeline.tables import create_table

_GSI = "GSI1"


@pytest.fixture
def table(dynamodb: Any) -> str:
    """A table of the project's shape: three users' partitions of three items each."""
    name = create_table(dynamodb, f"query-cost-{uuid.uuid4().hex[:12]}").table_name
    for user in ("u1", "u2", "u3"):
        for n in (3, 1, 2):
            item = {
                "pk": {"S": f"USER#{user}"},
                "sk": {"S": f"ENTITLEMENT#{user}-a{n}"},
                "gsi1pk": {"S": f"ARRAY#{user}-a{n}"},
                "gsi1sk": {"S": "ENTITLEMENT"},
            }
            dynamodb.put_item(TableName=name, Item=item)
    return name


@pytest.fixture
def whole_table_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The item count of every read of a whole table's items (moto's `Table.all_items`) as it
    returns them."""
    reads: list[int] = []
    patched = Table.all_items

    def counting(self: Table) -> list[Any]:
        answer: list[Any] = patched(self)
        reads.append(len(answer))
        return answer

    monkeypatch.setattr(Table, "all_items", counting)
    yield reads


def _query(dynamodb: Any, table: str, pk: str, **extra: Any) -> dict[str, Any]:
    answer: dict[str, Any] = dynamodb.query(
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
        ConsistentRead=True,
        **extra,
    )
    return answer


def test_a_query_of_one_partition_reads_only_that_partitions_items(
    dynamodb: Any, table: str, whole_table_reads: list[int]
) -> None:
    _query(dynamodb, table, "USER#u2")
    assert whole_table_reads == [3]


def test_a_query_answers_the_partitions_items_in_sort_key_order(dynamodb: Any, table: str) -> None:
    items = _query(dynamodb, table, "USER#u2")["Items"]
    assert [i["sk"]["S"] for i in items] == [f"ENTITLEMENT#u2-a{n}" for n in (1, 2, 3)]


def test_a_query_backwards_in_pages_answers_as_moto_does(dynamodb: Any, table: str) -> None:
    first = _query(dynamodb, table, "USER#u3", ScanIndexForward=False, Limit=2)
    rest = _query(
        dynamodb, table, "USER#u3", ScanIndexForward=False, ExclusiveStartKey=first["LastEvaluatedKey"]
    )
    assert [i["sk"]["S"] for i in first["Items"] + rest["Items"]] == [
        f"ENTITLEMENT#u3-a{n}" for n in (3, 2, 1)
    ]


def test_a_query_of_a_partition_with_no_items_answers_none(dynamodb: Any, table: str) -> None:
    assert _query(dynamodb, table, "USER#nobody")["Items"] == []


def test_an_index_query_still_finds_its_item_across_the_table(dynamodb: Any, table: str) -> None:
    answer = dynamodb.query(
        TableName=table,
        IndexName=_GSI,
        KeyConditionExpression="gsi1pk = :g",
        ExpressionAttributeValues={":g": {"S": "ARRAY#u1-a2"}},
    )
    assert [i["sk"]["S"] for i in answer["Items"]] == ["ENTITLEMENT#u1-a2"]


def test_a_query_of_a_table_without_a_sort_key_answers_its_one_item(dynamodb: Any) -> None:
    name = f"query-cost-hash-{uuid.uuid4().hex[:12]}"
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    for key in ("shard-1", "shard-2"):
        dynamodb.put_item(TableName=name, Item={"leaseKey": {"S": key}, "owner": {"S": f"w-{key}"}})
    answer = dynamodb.query(
        TableName=name,
        KeyConditionExpression="leaseKey = :k",
        ExpressionAttributeValues={":k": {"S": "shard-2"}},
    )
    assert [item["owner"]["S"] for item in answer["Items"]] == ["w-shard-2"]

"""moto on loopback, on a given or a free port."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from botocore.exceptions import ClientError

from devstack.moto_server import MotoServer
from pipeline.tables import TableDescription, create_table
from tests.support.dynamodb import client, unique_table_name


@pytest.fixture
def server() -> Iterator[MotoServer]:
    with MotoServer() as running:
        yield running


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_the_endpoint_is_on_loopback(server: MotoServer) -> None:
    assert server.endpoint.startswith("http://127.0.0.1:")


def test_the_server_listens_on_loopback_only(server: MotoServer) -> None:
    listening = {
        c.laddr.ip
        for c in psutil.Process().net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == server.port
    }
    assert listening == {"127.0.0.1"}


def test_port_zero_picks_a_free_port(server: MotoServer) -> None:
    assert server.port > 0


def test_a_given_port_is_used() -> None:
    port = free_loopback_port()
    with MotoServer(port) as running:
        assert running.port == port


def test_it_serves_dynamodb(server: MotoServer) -> None:
    assert "TableNames" in client(server.endpoint, "dynamodb").list_tables()


def test_it_serves_sqs(server: MotoServer) -> None:
    sqs = client(server.endpoint, "sqs")
    sqs.create_queue(QueueName="probe")
    assert any(url.endswith("/probe") for url in sqs.list_queues()["QueueUrls"])


def test_an_out_of_range_port_is_refused() -> None:
    with pytest.raises(ValueError, match="port"):
        MotoServer(70000)


# ---- TransactWriteItems roll back in place (devstack._moto_patches) --------------------------------


@pytest.fixture
def tables(server: MotoServer) -> tuple[Any, Any, TableDescription]:
    dynamodb, streams = client(server.endpoint, "dynamodb"), client(server.endpoint, "dynamodbstreams")
    return dynamodb, streams, create_table(dynamodb, unique_table_name("txn"))


def put(pk: str, condition: str | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"Item": {"pk": {"S": pk}, "sk": {"S": "s"}}}
    if condition:
        request["ConditionExpression"] = condition
    return {"Put": request}


def refused_transaction(dynamodb: Any, table: TableDescription) -> None:
    """Put 'phantom', then a put whose condition fails: the whole transaction is refused."""
    items = [put("phantom"), put("refused", "attribute_exists(pk)")]
    for item in items:
        item["Put"]["TableName"] = table.table_name
    with pytest.raises(ClientError, match="TransactionCanceledException"):
        dynamodb.transact_write_items(TransactItems=items)


def open_iterator(streams: Any, table: TableDescription) -> str:
    shard = streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"][0]
    iterator: str = streams.get_shard_iterator(
        StreamArn=table.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
    )["ShardIterator"]
    return iterator


def keys_read(streams: Any, iterator: str) -> list[str]:
    return [r["dynamodb"]["Keys"]["pk"]["S"] for r in streams.get_records(ShardIterator=iterator)["Records"]]


def test_a_refused_transaction_writes_none_of_its_items(tables: tuple[Any, Any, TableDescription]) -> None:
    dynamodb, _, table = tables
    refused_transaction(dynamodb, table)
    assert dynamodb.scan(TableName=table.table_name)["Items"] == []


def test_a_refused_transaction_leaves_an_updated_item_as_it_was(
    tables: tuple[Any, Any, TableDescription],
) -> None:
    dynamodb, _, table = tables
    key = {"pk": {"S": "kept"}, "sk": {"S": "s"}}
    dynamodb.put_item(TableName=table.table_name, Item={**key, "n": {"N": "1"}})
    with pytest.raises(ClientError):
        dynamodb.transact_write_items(
            TransactItems=[
                {"Update": {"TableName": table.table_name, "Key": key, "UpdateExpression": "SET n = :two",
                            "ExpressionAttributeValues": {":two": {"N": "2"}}}},
                {"Put": {"TableName": table.table_name, "Item": {"pk": {"S": "x"}, "sk": {"S": "s"}},
                         "ConditionExpression": "attribute_exists(pk)"}},
            ]
        )  # fmt: skip
    assert dynamodb.get_item(TableName=table.table_name, Key=key)["Item"]["n"] == {"N": "1"}


def test_an_open_iterator_sees_no_record_of_a_refused_transaction(
    tables: tuple[Any, Any, TableDescription],
) -> None:
    dynamodb, streams, table = tables
    iterator = open_iterator(streams, table)
    refused_transaction(dynamodb, table)
    assert keys_read(streams, iterator) == []


def test_an_open_iterator_keeps_reading_after_a_refused_transaction(
    tables: tuple[Any, Any, TableDescription],
) -> None:
    dynamodb, streams, table = tables
    iterator = open_iterator(streams, table)
    refused_transaction(dynamodb, table)
    dynamodb.put_item(TableName=table.table_name, Item={"pk": {"S": "after"}, "sk": {"S": "s"}})
    assert keys_read(streams, iterator) == ["after"]


def test_a_transaction_that_passes_writes_every_item(tables: tuple[Any, Any, TableDescription]) -> None:
    dynamodb, streams, table = tables
    items = [put("one"), put("two")]
    for item in items:
        item["Put"]["TableName"] = table.table_name
    dynamodb.transact_write_items(TransactItems=items)
    assert sorted(keys_read(streams, open_iterator_at_start(streams, table))) == ["one", "two"]


def open_iterator_at_start(streams: Any, table: TableDescription) -> str:
    shard = streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"][0]
    iterator: str = streams.get_shard_iterator(
        StreamArn=table.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    return iterator

"""The local stack's record of moto's service times (devstack.moto_server: `MotoServer.service_times`,
`GET /_devstack/service-times`): each serialised call's action, its time served under the DynamoDB lock
(a wait for the lock not counted) and the bytes it answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devstack.moto_server import SERVICE_TIMES_PATH, MotoServer
from pipeline.tables import create_table
from tests.support.dynamodb import client, unique_table_name

GET_RECORDS = "DynamoDBStreams_20120810.GetRecords"


@pytest.fixture
def server() -> Iterator[MotoServer]:
    with MotoServer() as running:
        yield running


def _read_once(server: MotoServer) -> None:
    dynamodb, streams = client(server.endpoint, "dynamodb"), client(server.endpoint, "dynamodbstreams")
    table = create_table(dynamodb, unique_table_name("svc"))
    dynamodb.put_item(TableName=table.table_name, Item={"pk": {"S": "USER#1"}, "sk": {"S": "ROW"}})
    shard = streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=table.stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    streams.get_records(ShardIterator=iterator)


def test_a_get_records_call_is_recorded_with_its_service_time_and_bytes(server: MotoServer) -> None:
    _read_once(server)
    calls = [call for call in server.service_times if call.action == GET_RECORDS]
    assert len(calls) == 1
    assert calls[0].seconds > 0 and calls[0].bytes > 0


def test_the_wait_for_the_lock_is_not_counted(server: MotoServer) -> None:
    _read_once(server)  # the table and stream exist; the next call only reads
    done = threading.Event()
    streams = client(server.endpoint, "dynamodbstreams")
    results: list[Any] = []

    def list_streams() -> None:
        results.append(streams.list_streams())
        done.set()

    with server.dynamodb_lock:
        waiting = threading.Thread(target=list_streams)
        waiting.start()
        time.sleep(1.0)  # the call waits for the lock all this time
    done.wait(30)
    waiting.join(30)
    call = [c for c in server.service_times if c.action == "DynamoDBStreams_20120810.ListStreams"][-1]
    assert results and call.seconds < 0.5


def test_the_service_times_are_answered_over_http(server: MotoServer) -> None:
    _read_once(server)
    answer = httpx.get(f"{server.endpoint}{SERVICE_TIMES_PATH}", timeout=10).json()
    assert [row[0] for row in answer if row[0] == GET_RECORDS] == [GET_RECORDS]
    assert all(len(row) == 4 for row in answer)

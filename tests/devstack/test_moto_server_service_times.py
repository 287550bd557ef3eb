"""The local stack's record of moto's service times (devstack.moto_server: `MotoServer.service_times`,
`GET /_devstack/service-times`): each serialised call's action, its time served under the DynamoDB lock
(a wait for the lock not counted) and the bytes it answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from devstack.moto_server import SERVICE_TIMES_PATH, MotoServer
from pipeline import create_table
from tests.support.dynamodb import client, unique_table_name

GET_RECORDS = "DynamoDBStreams_20120810.GetRecords"
LIST_STREAMS = "DynamoDBStreams_20120810.ListStreams"


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


def test_a_call_that_waited_for_the_lock_is_recorded_from_when_it_held_it(server: MotoServer) -> None:
    _read_once(server)  # the table and stream exist; the next call only reads
    answered = threading.Event()
    answered_at: list[float] = []
    streams = client(server.endpoint, "dynamodbstreams")

    def list_streams() -> None:
        streams.list_streams()
        answered_at.append(time.perf_counter())
        answered.set()

    with server.dynamodb_lock:
        waiting = threading.Thread(target=list_streams)
        waiting.start()
        # Room for the call to reach the lock; nothing is measured against this pause.
        time.sleep(0.5)
        assert not answered.is_set()  # a serialised call is not served while the lock is held
        released, released_at = time.time(), time.perf_counter()
    assert answered.wait(30)
    waiting.join(30)
    *before, call = list(server.service_times)
    assert call.action == LIST_STREAMS
    # Its time is counted from when it held the lock (after it was released here), not from its arrival.
    assert call.began >= released
    # and what is recorded lies inside the span from the release to the answer (the same clock): a time
    # that counted the wait would outlast it, whatever the machine's speed.
    assert 0 < call.seconds <= answered_at[0] - released_at
    assert call.bytes > 0
    # Recorded in the order they were served: the reads before it, each begun after the one before.
    assert GET_RECORDS in [earlier.action for earlier in before]
    assert [earlier.began for earlier in before] == sorted(earlier.began for earlier in before)
    assert all(earlier.began <= call.began for earlier in before)


def test_the_service_times_are_answered_over_http(server: MotoServer) -> None:
    _read_once(server)
    answer = httpx.get(f"{server.endpoint}{SERVICE_TIMES_PATH}", timeout=10).json()
    assert [row[0] for row in answer if row[0] == GET_RECORDS] == [GET_RECORDS]
    assert all(len(row) == 4 for row in answer)

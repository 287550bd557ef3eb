"""The local stack's record of moto's Kinesis GetRecords calls (devstack.moto_server: served one at a time
under `MotoServer.kinesis_read_lock`, each kept in `service_times` with its service time and the bytes it
answered, as the DynamoDB calls are): the ceiling of `python -m bench kinesis`. The read is passed on
as moto answered it; puts are not held by the read lock."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devstack.moto_server import MotoServer
from tests.support.dynamodb import client

KINESIS_GET_RECORDS = "Kinesis_20131202.GetRecords"


@pytest.fixture
def server() -> Iterator[MotoServer]:
    with MotoServer() as running:
        yield running


def _stream_with(server: MotoServer, data: list[bytes]) -> tuple[Any, str, list[str]]:
    """A one-shard stream holding `data` in order: (the client, a TRIM_HORIZON iterator, the puts'
    sequence numbers)."""
    kinesis = client(server.endpoint, "kinesis")
    name = f"svc-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=name, ShardCount=1)
    numbers = [
        kinesis.put_record(StreamName=name, Data=item, PartitionKey=f"k{index}")["SequenceNumber"]
        for index, item in enumerate(data)
    ]
    shard = kinesis.list_shards(StreamName=name)["Shards"][0]["ShardId"]
    iterator = kinesis.get_shard_iterator(StreamName=name, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"
    ]
    return kinesis, iterator, numbers


def _reads(server: MotoServer) -> list[Any]:
    return [call for call in list(server.service_times) if call.action == KINESIS_GET_RECORDS]


def test_a_get_records_call_is_recorded_with_its_service_time_and_the_bytes_it_answered(
    server: MotoServer,
) -> None:
    _, iterator, _ = _stream_with(server, [b"one", b"two"])
    # Sent by hand, as the launcher's JSON client sends it, so that the answer's own bytes are known.
    answer = httpx.post(
        server.endpoint,
        headers={"X-Amz-Target": KINESIS_GET_RECORDS, "Content-Type": "application/x-amz-json-1.1"},
        json={"ShardIterator": iterator, "Limit": 10},
        timeout=30,
    )
    assert answer.status_code == 200
    [call] = _reads(server)
    assert call.seconds > 0
    assert call.bytes == len(answer.content)


def test_the_read_answers_what_was_put_in_order_and_then_nothing(server: MotoServer) -> None:
    data = [f"record-{index}".encode() for index in range(5)]
    kinesis, iterator, numbers = _stream_with(server, data)
    page = kinesis.get_records(ShardIterator=iterator, Limit=10)
    assert [record["Data"] for record in page["Records"]] == data
    assert [record["SequenceNumber"] for record in page["Records"]] == numbers
    assert [record["PartitionKey"] for record in page["Records"]] == [f"k{i}" for i in range(5)]
    assert kinesis.get_records(ShardIterator=page["NextShardIterator"], Limit=10)["Records"] == []
    assert len(_reads(server)) == 2


def test_a_read_that_waited_for_the_lock_is_recorded_from_when_it_held_it(server: MotoServer) -> None:
    kinesis, iterator, _ = _stream_with(server, [b"one"])
    answered = threading.Event()
    answered_at: list[float] = []

    def read() -> None:
        kinesis.get_records(ShardIterator=iterator, Limit=10)
        answered_at.append(time.perf_counter())
        answered.set()

    with server.kinesis_read_lock:
        waiting = threading.Thread(target=read)
        waiting.start()
        # Room for the call to reach the lock; nothing is measured against this pause.
        time.sleep(0.5)
        assert not answered.is_set()  # a read is not served while the lock is held
        released, released_at = time.time(), time.perf_counter()
    assert answered.wait(30)
    waiting.join(30)
    [call] = _reads(server)
    assert call.began >= released
    # What is recorded lies inside the span from the release to the answer: a time that counted the
    # wait would outlast it, whatever the machine's speed.
    assert 0 < call.seconds <= answered_at[0] - released_at


def test_a_put_is_served_while_a_read_holds_the_lock_and_is_not_recorded(server: MotoServer) -> None:
    kinesis, _, _ = _stream_with(server, [b"one"])
    name = kinesis.list_streams()["StreamNames"][0]
    with server.kinesis_read_lock:
        answer = kinesis.put_record(StreamName=name, Data=b"two", PartitionKey="k")
    assert answer["SequenceNumber"]
    assert not [call for call in list(server.service_times) if call.action.startswith("Kinesis_")]

"""Crash and failover through the real daemon: nothing in the stream is missed, replays keep their ids."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.support.kcl import (
    RunningConsumer,
    dynamodb,
    python_children,
    running_consumer,
    stream_contents,
)

pytestmark = pytest.mark.kcl

WRITES = 300


def write_steadily(endpoint: str, table: str, count: int, per_second: float) -> threading.Thread:
    def run() -> None:
        client = dynamodb(endpoint)
        for i in range(count):
            client.put_item(
                TableName=table,
                Item={
                    "pk": {"S": f"USER#load-{i}"},
                    "sk": {"S": "ENTITLEMENT#acct"},
                    "userId": {"S": f"load-{i}"},
                    "arrayAccountId": {"S": "acct"},
                    "status": {"S": "Active"},
                },
            )
            time.sleep(1 / per_second)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def start_load_once_consuming(endpoint: str, consumer: RunningConsumer) -> threading.Thread:
    """Wait until the daemon delivers, then write steadily, so that a kill lands in the middle of the load."""
    table = consumer.settings.consumer.table_name
    write_steadily(endpoint, table, 1, per_second=100).join()
    consumer.wait_for(lambda evs: len(evs) >= 1)
    return write_steadily(endpoint, table, WRITES, per_second=30)


def assert_nothing_missed(endpoint: str, consumer: RunningConsumer) -> list[dict[str, object]]:
    stream = {
        r["eventID"]: r["dynamodb"]["SequenceNumber"] for r in stream_contents(endpoint, consumer.stream_arn)
    }
    assert len(stream) >= WRITES
    events = consumer.wait_for(lambda evs: set(stream) <= {e["event_id"] for e in evs}, timeout=240)
    for event in events:
        # A replayed event is the same event: same id, same position.
        assert stream[str(event["event_id"])] == event["sequence_number"]
    return events


def test_killing_the_python_child_mid_run_misses_nothing(moto_endpoint: str, tmp_path: Path) -> None:
    with running_consumer(moto_endpoint, tmp_path) as consumer:
        writer = start_load_once_consuming(moto_endpoint, consumer)
        consumer.wait_for(lambda evs: len(evs) >= 60)
        daemon = consumer.daemons["worker-1"]
        for pid in python_children(daemon):
            os.kill(pid, signal.SIGKILL)
        # A dead child takes the daemon down with it (the multilang contract); the supervisor restarts it.
        daemon.wait(timeout=120)
        writer.join()
        consumer.start_worker("worker-1")
        events = assert_nothing_missed(moto_endpoint, consumer)
        assert len({e["pid"] for e in events}) >= 2  # a new child delivered the rest


def test_killing_the_jvm_mid_run_misses_nothing(moto_endpoint: str, tmp_path: Path) -> None:
    with running_consumer(moto_endpoint, tmp_path) as consumer:
        writer = start_load_once_consuming(moto_endpoint, consumer)
        consumer.wait_for(lambda evs: len(evs) >= 60)
        consumer.daemons["worker-1"].kill()
        writer.join()
        consumer.start_worker("worker-1")
        events = assert_nothing_missed(moto_endpoint, consumer)
        assert len({e["pid"] for e in events}) >= 2  # two different child processes delivered them


def test_a_second_worker_takes_the_lease_and_continues_from_the_checkpoint(
    moto_endpoint: str, tmp_path: Path
) -> None:
    with running_consumer(moto_endpoint, tmp_path, worker_id="") as consumer:
        table = consumer.settings.consumer.table_name
        first = consumer.start_worker("worker-a")
        write_steadily(moto_endpoint, table, 50, per_second=100).join()
        owner = consumer.wait_for(lambda evs: len(evs) >= 50)[0]["worker_id"]
        standby = "worker-b" if owner == "worker-a" else "worker-a"
        if standby == "worker-b":
            consumer.start_worker("worker-b")
        else:  # the lease went to the other one; start the standby under the first name is impossible
            pytest.fail("worker-a was the only worker and must own the lease")
        time.sleep(5)  # worker-b joins the lease table
        first.kill()
        writer = write_steadily(moto_endpoint, table, WRITES - 50, per_second=100)
        writer.join()
        events = assert_nothing_missed(moto_endpoint, consumer)
        after = [e for e in events if e["worker_id"] == "worker-b"]
        assert after, "the standby worker never took the lease"
        assert int(str(after[0]["sequence_number"])) > int(str(events[0]["sequence_number"]))

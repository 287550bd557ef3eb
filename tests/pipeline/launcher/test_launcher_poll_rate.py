"""The launcher's GetRecords rate through the real daemon: at most 5 calls a second a shard, from start to
start, while it catches up on a backlog and while records keep arriving, even at the settings' floor of
100 ms idle (where the adapter's own wait allowed about 6.7 a second). Counted from moto's record of
the GetRecords calls it served (devstack.moto_server's service times)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from devstack.moto_server import MotoServer
from tests.support.kcl import dynamodb, running_consumer

pytestmark = pytest.mark.kcl

GET_RECORDS = "DynamoDBStreams_20120810.GetRecords"
BACKLOG = 1_500
LIVE_WRITES = 40  # one every 0.1 s: more often than the calls may come


def _put_rows(client: Any, table: str, first: int, count: int) -> None:
    for start in range(first, first + count, 25):
        rows = [
            {
                "PutRequest": {
                    "Item": {
                        "pk": {"S": f"USER#u{i}"},
                        "sk": {"S": "ENTITLEMENT#a"},
                        "status": {"S": "Active"},
                    }
                }
            }
            for i in range(start, min(first + count, start + 25))
        ]
        client.batch_write_item(RequestItems={table: rows})


def _most_in_a_second(starts: list[float]) -> int:
    return max(sum(1 for other in starts if start <= other < start + 1) for start in starts)


def test_a_shard_gets_at_most_5_get_records_calls_a_second_catching_up_and_under_traffic(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    with running_consumer(
        moto_server.endpoint,
        tmp_path / "state",
        worker_id="",
        consumer={"idle_time_between_reads_ms": 100, "commit_every_records": 500},
    ) as consumer:
        table = consumer.settings.consumer.table_name
        client = dynamodb(moto_server.endpoint)
        _put_rows(client, table, 0, BACKLOG)
        started = time.time()
        consumer.start_worker("worker-rate")
        consumer.wait_for(lambda events: len(events) >= 1)
        for i in range(LIVE_WRITES):
            _put_rows(client, table, BACKLOG + i, 1)
            time.sleep(0.1)
        consumer.wait_for(lambda events: len(events) >= BACKLOG + LIVE_WRITES)
        calls = [
            c.began for c in list(moto_server.service_times) if c.action == GET_RECORDS and c.began >= started
        ]
    # Only this worker read a stream since it started: every call is its one shard's.
    assert (len(calls) > LIVE_WRITES // 4, _most_in_a_second(calls) <= 5) == (True, True)

"""An erased account stays erased: after ERASE is answered ACK DONE, replaying the whole stream through
the real KCL daemon, later than the duplicate window, lands none of its events again."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from devstack.fake_array import FakeArrayServer
from devstack.moto_server import MotoServer
from entitlements.compose import erasure_worker
from pipeline.daemon import DaemonSpec, KclDaemon
from processors.erasure import ensure_erasure_channel
from schema.erasure import CHANNEL_CONSTANTS, serialize_erasure_message
from tests.processors.erasure.erasure_subscriber_helpers import entitlement_item, erase
from tests.support.kcl import consumer_settings, dynamodb, running_consumer, stream_contents
from tests.support.lake import query_lake
from tests.support.polling import wait_for

pytestmark = pytest.mark.kcl


def client(endpoint: str, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def lake_rows(settings: Any, user: str) -> int:
    # raw_changes and raw_outcomes: every landed row, replays included, with no mask applied.
    counts = [
        query_lake(settings, f"SELECT count(*) FROM {view} WHERE user_id = ?", [user])
        for view in ("raw_changes", "raw_outcomes")
    ]
    return sum(int(rows[0][0]) for rows in counts if rows)


def test_erasure_survives_a_replay_of_the_stream_later_than_the_duplicate_window(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    erased, bystander = f"user-{uuid.uuid4().hex[:8]}", f"user-{uuid.uuid4().hex[:8]}"
    endpoint = moto_server.endpoint
    erasure = {
        "queue_name": f"erasure-{uuid.uuid4().hex[:6]}",
        "topic_name": f"topic-{uuid.uuid4().hex[:6]}",
        "responses_queue_name": f"responses-{uuid.uuid4().hex[:6]}",
        "handler_timeout_seconds": 10,
        "batch_timeout_seconds": 5,
        "pass_two_delay_seconds": 2,
    }
    with (
        FakeArrayServer(every_account_exists=True) as array,
        running_consumer(
            endpoint, tmp_path / "first", array={"base_url": array.url}, erasure=erasure
        ) as consumer,
    ):
        settings = consumer.settings
        table = settings.consumer.table_name
        for user, status in ((erased, "Active"), (erased, "Superseded"), (bystander, "Active")):
            item = entitlement_item(user, f"acct-{uuid.uuid4().hex[:6]}", status)
            dynamodb(endpoint).put_item(TableName=table, Item=item)
        wait_for(
            lambda: lake_rows(settings, erased) >= 2 and lake_rows(settings, bystander) >= 1, timeout=180
        )

        channel = ensure_erasure_channel(client(endpoint, "sqs"), client(endpoint, "sns"), settings.erasure)
        worker = erasure_worker(settings, settings.erasure, wait_seconds=1)
        request = erase(erased)
        client(endpoint, "sns").publish(
            TopicArn=channel.topic_arn, Message=serialize_erasure_message(request)
        )
        sqs = client(endpoint, "sqs")
        answers: list[dict[str, Any]] = []

        def answered() -> bool:
            worker.poll_once(wait_seconds=1)
            got = sqs.receive_message(QueueUrl=channel.responses_queue_url, WaitTimeSeconds=0)
            answers.extend(json.loads(m["Body"]) for m in got.get("Messages", []))
            return any(a["requestId"] == request.request_id for a in answers)

        wait_for(answered, timeout=120)
        [answer] = [a for a in answers if a["requestId"] == request.request_id]
        assert (answer["type"], answer["outcome"], answer["sendNo"]) == ("erasure/ACK", "DONE", 1)
        time.sleep(2 * settings.consumer.commit_interval_seconds)
        assert lake_rows(settings, erased) == 0

    # The replay: a new KCL application (fresh leases, from TRIM_HORIZON) whose clock runs later than
    # the duplicate window, on the same state (ledger) and lake.
    later = datetime.now(UTC) + timedelta(
        seconds=2 * CHANNEL_CONSTANTS.duplicate_after_completion_window_seconds
    )
    replay = consumer_settings(
        endpoint,
        table,
        tmp_path / "first",
        consumer={
            "application_name": f"replay-{uuid.uuid4().hex[:6]}",
            "event_journal": tmp_path / "replay.jsonl",
        },
        clock={"start": later.isoformat(), "anchor": datetime.now(UTC).isoformat(), "speed": 1.0},
        array={"base_url": "http://127.0.0.1:9"},
        erasure=erasure,
    )
    daemon = KclDaemon(
        DaemonSpec.from_settings(
            replay, stream_arn=consumer.stream_arn, worker_id="replayer", work_dir=tmp_path / "replay-daemon"
        )
    )
    daemon.start()
    try:
        in_stream = {r["eventID"] for r in stream_contents(endpoint, consumer.stream_arn)}

        def replayed() -> bool:
            path = tmp_path / "replay.jsonl"
            seen = (
                {json.loads(line)["event_id"] for line in path.read_text().splitlines()}
                if path.exists()
                else set()
            )
            return in_stream <= seen

        wait_for(replayed, timeout=180)
    finally:
        daemon.stop()
    assert lake_rows(replay, erased) == 0
    assert lake_rows(replay, bystander) >= 1

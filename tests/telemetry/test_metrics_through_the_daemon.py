"""`entitlements consume` through the real daemon: its Prometheus endpoint serves the KCL children's
figures (the records counter moves as rows are written), and every EMF line the children write to the
configured file is a valid EMF document declaring its metrics as members. One consumer for both."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from config import Settings, settings_environment
from entitlements.compose import setup_retry_queues
from tests.support.kcl import consumer_settings, dynamodb, new_table
from tests.support.polling import wait_for
from tests.telemetry._emf_format import emf_problems
from tests.telemetry._scrape import free_port, scrape

pytestmark = pytest.mark.kcl

RECORDS = ("entitlements_consumer_records_total", ())
CHECKPOINTS = ("entitlements_consumer_checkpoints_total", ())


@dataclass
class Consume:
    settings: Settings
    url: str
    emf_file: Path
    process: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def consume(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Consume]:
    state = tmp_path_factory.mktemp("metrics")
    table, arn = new_table(moto_endpoint)
    port, emf_file = free_port(), state / "emf" / "consumer.jsonl"
    settings = consumer_settings(
        moto_endpoint,
        table,
        state,
        consumer={"stream_arn": arn},
        metrics={"consume_port": port, "emf_file": emf_file, "emf_interval_seconds": 1.0},
    )
    setup_retry_queues(settings)
    env = {**os.environ, **settings_environment(settings)}
    with (state / "consume.err").open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", "from entitlements.cli import main; main()", "consume"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    running = Consume(settings, f"http://127.0.0.1:{port}/metrics", emf_file, process)
    try:
        yield running
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def put_rows(consume: Consume, prefix: str, count: int) -> None:
    for i in range(count):
        dynamodb(consume.settings.aws.endpoint_url or "").put_item(
            TableName=consume.settings.consumer.table_name,
            Item={
                "pk": {"S": f"USER#{prefix}-{i}"},
                "sk": {"S": f"ENTITLEMENT#acct-{prefix}-{i}"},
                "userId": {"S": f"{prefix}-{i}"},
                "arrayAccountId": {"S": f"acct-{prefix}-{i}"},
                "status": {"S": "Active"},
            },
        )


def sample(consume: Consume, series: tuple[str, tuple[tuple[str, str], ...]]) -> float | None:
    try:
        return scrape(consume.url).get(series)
    except httpx.TransportError:  # the endpoint not up yet
        return None


def records(consume: Consume) -> float | None:
    return sample(consume, RECORDS)


def test_the_endpoint_of_a_running_consumer_shows_the_records_counter_moving(consume: Consume) -> None:
    put_rows(consume, "first", 3)
    first = wait_for(lambda: records(consume), timeout=300, describe=lambda: "no records on the endpoint yet")
    put_rows(consume, "second", 5)
    moved = wait_for(
        lambda: value if (value := records(consume)) is not None and value >= first + 5 else None,
        timeout=120,
        describe=lambda: f"records counter at {records(consume)}, from {first}",
    )
    assert moved >= first + 5
    assert scrape(consume.url)[("entitlements_consumer_daemon_running", ())] == 1
    # A checkpoint follows the records by up to a commit interval (the consumer flushes, then
    # checkpoints): the last CI scraped it at 0 the moment the records had moved, so it is waited for.
    checkpoints = wait_for(
        lambda: sample(consume, CHECKPOINTS),
        timeout=120,
        describe=lambda: f"checkpoints counter at {sample(consume, CHECKPOINTS)}",
    )
    assert checkpoints >= 1


def test_every_emf_line_the_children_write_is_an_emf_document_declaring_its_metrics(
    consume: Consume,
) -> None:
    def counted() -> list[dict[str, object]] | None:
        if not consume.emf_file.exists():
            return None
        lines = [json.loads(line) for line in consume.emf_file.read_text().splitlines() if line]
        counting = any(sum(doc.get("Records", [0])) > 0 for doc in lines)
        # The children publish every interval: a checkpoint's and a flush's figures may come in a
        # document after the first one counting records.
        named = {name for doc in lines for name in doc}
        return lines if counting and {"Checkpoints", "FlushDuration"} <= named else None

    put_rows(consume, "emf", 2)
    documents = wait_for(
        counted, timeout=300, describe=lambda: "no EMF document counting records, checkpoints and flushes"
    )
    assert [emf_problems(document) for document in documents] == [[]] * len(documents)
    assert {document["Process"] for document in documents} == {"consumer"}
    assert {"Records", "Checkpoints", "IteratorAge", "FlushDuration"} <= {
        name for document in documents for name in document
    }

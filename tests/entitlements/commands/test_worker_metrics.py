"""A long-running worker's metrics endpoint: `entitlements cleanup retry-worker` serves the retry
queue's depth it measures on ENTITLEMENTS_METRICS__RETRY_WORKER_PORT, on loopback."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from config import load_settings
from entitlements.compose import setup_retry_queues
from tests.support.dynamodb import REGION, client
from tests.telemetry._scrape import free_port, scrape

DEPTH = ("entitlements_cleanup_retry_queue_depth", ())
CLI = "from entitlements.cli import main; main()"


def test_the_retry_worker_serves_the_depth_of_its_queue(moto_endpoint: str, tmp_path: Path) -> None:
    queue = f"retry-{uuid.uuid4().hex[:8]}"
    setup_retry_queues(
        load_settings(
            aws={"endpoint_url": moto_endpoint, "region": REGION}, cleanup={"retry_queue_name": queue}
        )
    )
    sqs = client(moto_endpoint, "sqs")
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="{}", DelaySeconds=900)  # waits: the worker cannot take it
    port = free_port()
    env = {
        **os.environ,
        "ENTITLEMENTS_AWS__ENDPOINT_URL": moto_endpoint,
        "ENTITLEMENTS_AWS__REGION": REGION,
        "ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake"),
        "ENTITLEMENTS_METRICS__RETRY_WORKER_PORT": str(port),
    }
    worker = subprocess.Popen(
        [sys.executable, "-c", CLI, "cleanup", "retry-worker", "--queue-name", queue],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        depth = None
        deadline = time.monotonic() + 60
        while depth != 1 and time.monotonic() < deadline:  # 0 until the worker's first measurement
            with contextlib.suppress(httpx.TransportError):  # not serving yet
                depth = scrape(f"http://127.0.0.1:{port}/metrics").get(DEPTH)
            time.sleep(0.2)
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=60)
    assert (depth, code) == (1, 0)

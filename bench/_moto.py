"""moto in its own process for the benchmarks, boto3 clients pointed at it (loopback only), and the
service times the project's moto server kept."""

from __future__ import annotations

__all__ = ["GET_RECORDS", "REGION", "moto_client", "moto_server", "served_calls"]

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import httpx
from botocore.config import Config

from devstack.moto_server import SERVICE_TIMES_PATH, ServedCall

REGION = "eu-west-1"


@contextmanager
def moto_server() -> Iterator[str]:
    """Start `moto.server` on a free loopback port, yield its endpoint, stop it (kill if it hangs)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(400):
            try:
                httpx.get(f"{endpoint}/moto-api/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def moto_client(endpoint: str, service: str, config: Config) -> Any:
    """A boto3 client for `service` at the moto `endpoint`, with the bench's own retry/pool `config`."""
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=config,
    )


GET_RECORDS = "DynamoDBStreams_20120810.GetRecords"


def served_calls(endpoint: str, action: str | None = None) -> list[ServedCall]:
    """The serialised calls the project's moto server at `endpoint` has served (the last 100,000), each
    with its service time under the DynamoDB lock (`devstack.moto_server`); only `action`'s if given."""
    rows = httpx.get(f"{endpoint}{SERVICE_TIMES_PATH}", timeout=60).json()
    return [ServedCall(*row) for row in rows if action is None or row[0] == action]

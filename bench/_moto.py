"""moto in its own process for the benchmarks, and boto3 clients pointed at it (loopback only)."""

from __future__ import annotations

__all__ = ["REGION", "moto_client", "moto_server"]

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

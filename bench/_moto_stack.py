"""The project's moto server (devstack.moto_server: one DynamoDB lock, the transaction fix) in a process of
its own, for the end-to-end benchmarks: its CPU is read apart from the bench's, and a boto3 loop in the
bench does not share moto's interpreter lock.

Run as `python -m bench._moto_stack`: prints its endpoint on one stdout line and serves until stdin closes.
"""

from __future__ import annotations

__all__ = ["MotoStack", "moto_stack"]

import logging
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devstack.moto_server import MotoServer

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class MotoStack:
    endpoint: str
    pid: int


@contextmanager
def moto_stack() -> Iterator[MotoStack]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench._moto_stack"],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None and process.stdin is not None
    endpoint = process.stdout.readline().decode().strip()
    try:
        if not endpoint.startswith("http://127.0.0.1:"):
            raise SystemExit("bench: the moto process did not start")
        yield MotoStack(endpoint=endpoint, pid=process.pid)
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


def main() -> None:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with MotoServer() as server:
        print(server.endpoint, flush=True)
        sys.stdin.read()  # until the bench closes our stdin


if __name__ == "__main__":
    main()

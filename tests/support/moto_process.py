"""The project's moto server (devstack.moto_server) and the TTL emulator beside it, in a process of their
own: a test can then freeze AWS (SIGSTOP) without freezing itself, the daemon or the child.

Run as `python -m tests.support.moto_process`: it prints its endpoint on one stdout line, expires items
by the real clock (TTL in epoch seconds) every fifth of a second, and runs until stdin closes.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devstack.moto_server import MotoServer
from devstack.ttl_emulator import TtlEmulator
from pipeline.clock import SystemClock

REPO = Path(__file__).resolve().parents[2]


@dataclass
class MotoProcess:
    endpoint: str
    pid: int

    def freeze(self) -> None:
        """SIGSTOP: every connection stays open and nothing answers, as a hung dependency."""
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


@contextmanager
def moto_in_its_own_process() -> Iterator[MotoProcess]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.moto_process"],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None and process.stdin is not None
    moto = MotoProcess(endpoint=process.stdout.readline().decode().strip(), pid=process.pid)
    try:
        if not moto.endpoint.startswith("http://127.0.0.1:"):
            raise RuntimeError("the moto process did not start")
        yield moto
    finally:
        moto.thaw()  # never leave it stopped, whatever the test did
        process.stdin.close()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


def _serve() -> None:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with MotoServer() as server:
        emulator = TtlEmulator(SystemClock(), interval_seconds=0.2, lock=server.dynamodb_lock)
        emulator.start()
        sys.stdout.write(server.endpoint + "\n")
        sys.stdout.flush()
        try:
            sys.stdin.read()  # until the test closes it
        finally:
            emulator.stop()


if __name__ == "__main__":
    _serve()

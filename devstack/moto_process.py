"""The project's moto server (`devstack.moto_server`: one DynamoDB lock, the transaction fix) in a process
of its own, optionally with the TTL emulator beside it (expiring by the real clock). Apart from its user:
a bench reads its CPU on its own and a boto3 loop does not share moto's interpreter lock; a test can
freeze AWS (SIGSTOP) without freezing itself, the daemon or the child.

    with moto_process(ttl_interval_seconds=0.2) as moto:
        ...  # moto.endpoint on 127.0.0.1; moto.freeze() / moto.thaw()

Run as `python -m devstack.moto_process [TTL_INTERVAL_SECONDS]`: prints its endpoint on one stdout line
and serves until its stdin closes.
"""

from __future__ import annotations

__all__ = ["MotoProcess", "moto_process"]

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from devstack.moto_server import LOOPBACK, MotoServer
from devstack.ttl_emulator import TtlEmulator
from schema.clock import SystemClock
from schema.errors import TerminalError

_STOP_SECONDS = 20


@dataclass(frozen=True)
class MotoProcess:
    endpoint: str
    pid: int

    def freeze(self) -> None:
        """SIGSTOP: every connection stays open and nothing answers, as a hung dependency."""
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


@contextmanager
def moto_process(*, ttl_interval_seconds: float | None = None) -> Iterator[MotoProcess]:
    """moto in a child process (with the TTL emulator every `ttl_interval_seconds` when given); stopped,
    thawed first, when the block ends."""
    ttl = [] if ttl_interval_seconds is None else [repr(ttl_interval_seconds)]
    process = subprocess.Popen(
        [sys.executable, "-m", "devstack.moto_process", *ttl],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None and process.stdin is not None
    moto = MotoProcess(endpoint=process.stdout.readline().decode().strip(), pid=process.pid)
    try:
        if not moto.endpoint.startswith(f"http://{LOOPBACK}:"):
            raise TerminalError(
                f"the moto process did not start (`python -m devstack.moto_process` exited {process.poll()})"
            )
        yield moto
    finally:
        moto.thaw()  # never leave it stopped, whatever the block did
        process.stdin.close()
        try:
            process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=_STOP_SECONDS)


def _serve(ttl_interval_seconds: float | None) -> None:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with MotoServer() as server, ExitStack() as running:
        if ttl_interval_seconds is not None:
            emulator = TtlEmulator(
                SystemClock(), interval_seconds=ttl_interval_seconds, lock=server.dynamodb_lock
            )
            emulator.start()
            running.callback(emulator.stop)
        sys.stdout.write(server.endpoint + "\n")
        sys.stdout.flush()
        sys.stdin.read()  # until the parent closes it


if __name__ == "__main__":
    _serve(float(sys.argv[1]) if len(sys.argv) > 1 else None)

"""Whether `entitlements consume` runs on a state folder, for `entitlements consumer-status`.

While it runs, `consume` holds an exclusive lock on `<state>/consumer.lock` (released by the kernel
when the process ends, however it ends) and keeps `<state>/consumer.json`: its pid, worker id, start
time and metrics endpoint, and its stop time once stopped. A second `consume` on the same folder is
refused: the two would share the stats, stores and worker id.
"""

from __future__ import annotations

__all__ = ["ConsumerAlreadyRunning", "ConsumerPresence", "PresenceReport"]

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from schema import write_private_file
from schema.errors import TerminalError


class ConsumerAlreadyRunning(TerminalError):
    """Another `entitlements consume` holds the state folder."""


@dataclass(frozen=True)
class PresenceReport:
    running: bool
    pid: int | None = None
    worker_id: str | None = None
    started_at: str | None = None
    stopped_at: str | None = None
    metrics_url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "running": self.running,
            "pid": self.pid,
            "worker_id": self.worker_id,
            "started_at": self.started_at,
            "stopped_at": self.stopped_at,
            "metrics_url": self.metrics_url,
        }


class ConsumerPresence:
    def __init__(self, state_dir: Path) -> None:
        self._lock = FileLock(state_dir / "consumer.lock", timeout=0)
        self._record = state_dir / "consumer.json"
        self._state_dir = state_dir

    def claim(self, *, worker_id: str, metrics_url: str | None) -> None:
        """Take the folder for this process, or raise `ConsumerAlreadyRunning`."""
        self._state_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except Timeout:
            raise ConsumerAlreadyRunning(
                f"a consumer already runs on the state folder {self._state_dir}: stop it first "
                "(`entitlements consumer-status` names its pid), or set ENTITLEMENTS_CONSUMER__STATE_DIR"
            ) from None
        self._write(
            {
                "pid": os.getpid(),
                "worker_id": worker_id,
                "started_at": datetime.now(UTC).isoformat(),
                "stopped_at": None,
                "metrics_url": metrics_url,
            }
        )

    def release(self) -> None:
        record = self._read()
        record["stopped_at"] = datetime.now(UTC).isoformat()
        self._write(record)
        self._lock.release()

    def report(self) -> PresenceReport:
        """Running if another process holds the lock; what the last run recorded either way."""
        record = self._read()
        running = False
        if self._state_dir.exists():
            try:
                self._lock.acquire()
            except Timeout:
                running = True
            else:
                self._lock.release()
        pid = record.get("pid")
        return PresenceReport(
            running=running,
            pid=pid if isinstance(pid, int) else None,
            worker_id=record.get("worker_id"),
            started_at=record.get("started_at"),
            stopped_at=None if running else record.get("stopped_at"),
            metrics_url=record.get("metrics_url"),
        )

    def _read(self) -> dict[str, Any]:
        try:
            loaded = json.loads(self._record.read_text())
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def _write(self, record: dict[str, Any]) -> None:
        write_private_file(self._record, json.dumps(record, sort_keys=True).encode())

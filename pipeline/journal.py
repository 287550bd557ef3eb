"""A handler that appends each event's identity to a JSON-lines file: a tap for tests and debugging.

It records where each event came from and what kind it is (never item attributes beyond the keys),
and makes the file durable on flush, so what it holds is exactly what the consumer delivered before
each checkpoint.
"""

from __future__ import annotations

__all__ = ["JournalHandler"]

import json
import os
from pathlib import Path

from pipeline.events import StreamEvent
from schema import append_private_file


class JournalHandler:
    name = "journal"

    def __init__(self, path: Path, worker_id: str | None = None) -> None:
        self._path = path
        self._worker_id = worker_id
        self._pending: list[str] = []

    def add(self, event: StreamEvent) -> None:
        self._pending.append(
            json.dumps(
                {
                    "event_id": event.event_id,
                    "event_type": event.event_type.value,
                    "change": event.change.value,
                    "shard_id": event.position.shard_id,
                    "sequence_number": event.position.sequence_number,
                    "keys": event.keys,
                    "ttl_deletion": event.ttl_deletion,
                    "created_at": event.created_at.isoformat(),
                    "pid": os.getpid(),
                    "worker_id": self._worker_id,
                },
                sort_keys=True,
                default=str,
            )
        )

    def flush(self) -> None:
        if not self._pending:
            return
        append_private_file(self._path, ("\n".join(self._pending) + "\n").encode())
        self._pending.clear()

    def discard_pending(self) -> None:
        self._pending.clear()

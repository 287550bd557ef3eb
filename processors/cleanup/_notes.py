"""Deletion notes: which expiries this processor deleted at Array, kept on local disk.

The delete at Array and the outcome that says so cannot be made durable together: a crash (kill -9)
after Array answered 2xx and before the lake's flush loses the `cleanup.deleted` outcome, and the replay's
repeat delete answers 404. Without a note that replay would report `cleanup.already_deleted` for an
account this processor deleted. So right after a 2xx the procedure writes a note (an empty file named by
a digest of the source event id, fsynced, 0600 in a 0700 folder), and a 404 for a noted expiry is
reported as `cleanup.deleted` (detail `earlier_attempt`). What is left open is the instant between
Array's answer and the note's write.

Notes hold no personal data (a digest of a stream event id). Those older than `keep_days` are removed
when the notes are opened: a replay comes within the stream's 24-hour retention, a retry within the
retry queue's 14 days.
"""

from __future__ import annotations

__all__ = ["DeletionNotes", "LocalDeletionNotes"]

import hashlib
import logging
import time
from pathlib import Path
from typing import Protocol

from schema._files import private_dir, write_private_file

logger = logging.getLogger(__name__)

_SUFFIX = ".deleted"


class DeletionNotes(Protocol):
    def note(self, source_event_id: str) -> None:
        """Record, durably, that this processor deleted the account `source_event_id` asked about."""
        ...

    def noted(self, source_event_id: str) -> bool:
        """Whether a delete of an earlier attempt at `source_event_id` was answered 2xx."""
        ...


class LocalDeletionNotes:
    """`DeletionNotes` as files in `root` (one per expiry). Safe across threads and processes."""

    def __init__(self, root: Path, *, keep_days: float = 30.0) -> None:
        self._root = private_dir(root)
        self._prune(keep_days * 86_400)

    def note(self, source_event_id: str) -> None:
        write_private_file(self._path(source_event_id), b"")

    def noted(self, source_event_id: str) -> bool:
        return self._path(source_event_id).exists()

    def _path(self, source_event_id: str) -> Path:
        return self._root / f"{hashlib.sha256(source_event_id.encode()).hexdigest()[:40]}{_SUFFIX}"

    def _prune(self, keep_seconds: float) -> None:
        cutoff = time.time() - keep_seconds
        removed = 0
        for path in self._root.glob(f"*{_SUFFIX}"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue  # another process pruned it
        if removed:
            logger.info("old deletion notes removed", extra={"count": removed})

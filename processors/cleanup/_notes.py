"""Deletion notes: a write-ahead record, on local disk, of the deletes this processor sent to Array.

The delete at Array and the outcome that says so cannot be made durable together: a crash (kill -9)
after Array applied the delete and before the lake's flush loses the `cleanup.deleted` outcome, and the
replay's repeat delete answers 404. So the procedure notes, durably and **before** the request is sent,
that a delete is being sent for the expiry (`note_sending`: an owner-only file named by a digest of the
source event id, fsynced with its folder). The rule the procedure applies on a 404:

- the expiry was noted `SENT` by an earlier attempt (or the parked work says a delete was sent): the account
  is gone because of this processor's earlier delete (`cleanup.deleted`, detail `earlier_attempt`). Nothing
  else in this system deletes Array accounts (the service design: the expiration handler, this processor, is
  what deletes an Array account), and the note precedes every request, so no crash instant is left between a
  delete reaching Array and the note: a crash before the note means no request was sent; a crash after it is
  covered whether the request was sent, applied or answered;
- no earlier delete of the expiry was sent: the account was gone before this processor asked
  (`cleanup.already_deleted`), and the expiry is noted `GONE` so that a replay answers the same. A crash
  between that 404 and the `GONE` note leaves the `SENT` note, and the replay reports `deleted` for an
  account that was gone before its first delete: the one instant left open, and for an account that in
  this system only this processor can have deleted (for another expiry naming it).

Notes hold no personal data: the file name is a digest of a stream event id (DynamoDB's random
`eventID`, not a user id, an account id or a key) and the content one of two words, so an erasure has
nothing to remove from them. Notes older than `keep_days` are removed when the notes are opened: a replay
comes within the stream's 24-hour retention, a retry within the retry queue's 14 days.
"""

from __future__ import annotations

__all__ = ["DeletionNotes", "LocalDeletionNotes", "NoteState"]

import hashlib
import logging
import time
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from schema._files import private_dir, write_private_file

logger = logging.getLogger(__name__)

_SUFFIX = ".deleted"


class NoteState(StrEnum):
    NONE = "none"  # no delete was ever sent for the expiry
    SENT = "sent"  # a delete was sent (or about to be): a later 404 is this processor's delete
    GONE = "gone"  # the expiry's first delete answered 404: the account was gone before it


class DeletionNotes(Protocol):
    def state(self, source_event_id: str) -> NoteState:
        """What is noted for the expiry `source_event_id` asked about."""
        ...

    def note_sending(self, source_event_id: str) -> None:
        """Record, durably before returning, that a delete is about to be sent for the expiry."""
        ...

    def note_gone(self, source_event_id: str) -> None:
        """Record, durably, that the expiry's first delete found the account already gone."""
        ...


class LocalDeletionNotes:
    """`DeletionNotes` as files in `root` (one per expiry, replaced atomically). Safe across threads and
    processes: two writers of one expiry's note are its stream attempt and its retry, never at once."""

    def __init__(self, root: Path, *, keep_days: float = 30.0) -> None:
        self._root = private_dir(root)
        self._prune(keep_days * 86_400)

    def state(self, source_event_id: str) -> NoteState:
        try:
            content = self._path(source_event_id).read_bytes()
        except FileNotFoundError:
            return NoteState.NONE
        # An empty note was written after a 2xx by the notes' first version: a delete was sent.
        return NoteState.GONE if content == NoteState.GONE.encode() else NoteState.SENT

    def note_sending(self, source_event_id: str) -> None:
        write_private_file(self._path(source_event_id), NoteState.SENT.encode())

    def note_gone(self, source_event_id: str) -> None:
        write_private_file(self._path(source_event_id), NoteState.GONE.encode())

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

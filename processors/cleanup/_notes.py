"""Cleanup notes: what this processor did about each expiry, on local disk, so that nothing finished is
done again and a replay's 404 says what it means.

The delete at Array and the outcome that says so cannot be made durable together: a crash (kill -9)
after Array applied the delete and before the lake's flush loses the outcome; a lake that fails has the
window replayed; a retry message may arrive twice (SQS is at-least-once, and a send that timed out
counts as sent). So each expiry's note moves, durably (an owner-only file named by a digest of the
source event id, replaced atomically and fsynced with its folder), through:

- `SENDING`, written before the delete request: the request may not have left (a refused connection, a
  crash before the socket write). Unconfirmed: a later 404 is not taken as this processor's delete;
- `SENT`, written once the request is known to have reached Array without a usable answer (a timeout,
  a connection lost after sending, a 5xx): the delete may have been applied;
- a **final** note, written as soon as the expiry's final outcome is known and before that outcome is
  handed on: `DELETED` (Array answered 2xx), `GONE` (a 404: already deleted, detail saying after what),
  `REFUSED` (the in-use guard refused) or `FAILED` (a terminal refusal). Every later attempt of the
  expiry (a crash replay, a replay after the lake failed, a doubled retry message) finds the final note
  and records the same outcome again without calling Array.

The rule on a 404, by what came before it: a `SENT` note or parked work saying `delete_sent` (a request
confirmed to have reached Array) gives `cleanup.already_deleted` detail `earlier_attempt`; an unanswered
request of the same call detail `earlier_request`; only a `SENDING` note detail `unconfirmed_attempt`;
nothing at all the plain code (`404`). The outcome kind is `cleanup.already_deleted` in every case: the
account was gone when this request came, whoever removed it. A crash between a 2xx and its final note
leaves `SENDING`: the replay's repeat delete answers 404 (`unconfirmed_attempt`), the one repeated
request a kill can still cause (the bench's "rework" figure counts them).

`claim` holds an expiry for one attempt at a time (an exclusive, non-blocking `flock` on the expiry's
lock file), across threads and processes sharing the folder: a second attempt while the first runs is
told so and parks instead of sending a second delete. The notes cover one host's state folder; work
parked for another host carries `delete_sent`.

Notes hold no personal data: the file name is a digest of a stream event id (DynamoDB's random
`eventID`, not a user id, an account id or a key) and the content a word and a short code, so an erasure
has nothing to remove from them. Notes older than `keep_days` are removed when the notes are opened: a
replay comes within the stream's 24-hour retention, a retry within the retry queue's 14 days.
"""

from __future__ import annotations

__all__ = ["FINAL_NOTES", "DeletionNotes", "LocalDeletionNotes", "Note", "NoteState"]

import fcntl
import hashlib
import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from schema import PRIVATE_FILE_MODE, private_dir, write_private_file

logger = logging.getLogger(__name__)

_SUFFIX = ".deleted"
_LOCK_SUFFIX = ".lock"
_DETAIL = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


class NoteState(StrEnum):
    NONE = "none"  # nothing was ever done for the expiry
    SENDING = "sending"  # a delete request is about to be sent: it may not have left (unconfirmed)
    SENT = "sent"  # a delete request reached Array without a usable answer: it may have been applied
    DELETED = "deleted"  # final: Array answered 2xx
    GONE = "gone"  # final: Array answered 404 (already deleted)
    REFUSED = "refused"  # final: the in-use guard refused the delete
    FAILED = "failed"  # final: Array refused the delete for good


FINAL_NOTES = frozenset({NoteState.DELETED, NoteState.GONE, NoteState.REFUSED, NoteState.FAILED})

# The words on disk. "left" is the confirmed note: the first versions wrote "sent" *before* the request
# (write-ahead), which is what `SENDING` means now, so that word keeps its old meaning.
_WORDS = {
    NoteState.SENDING: "sending",
    NoteState.SENT: "left",
    NoteState.DELETED: "deleted",
    NoteState.GONE: "gone",
    NoteState.REFUSED: "refused",
    NoteState.FAILED: "failed",
}
_STATES = {word: state for state, word in _WORDS.items()} | {"sent": NoteState.SENDING}


@dataclass(frozen=True, slots=True)
class Note:
    state: NoteState
    detail: str | None = None  # a final note's outcome detail (a short code)

    @property
    def final(self) -> bool:
        return self.state in FINAL_NOTES


class DeletionNotes(Protocol):
    def read(self, source_event_id: str) -> Note:
        """What is noted for the expiry `source_event_id`."""
        ...

    def note(self, source_event_id: str, state: NoteState, detail: str | None = None) -> None:
        """Record, durably before returning, the expiry's state (and a final note's detail)."""
        ...

    def claim(self, source_event_id: str) -> AbstractContextManager[bool]:
        """Hold the expiry for one attempt: True when held, False when another attempt holds it."""
        ...


class LocalDeletionNotes:
    """`DeletionNotes` as files in `root` (one per expiry, replaced atomically, and its lock file). Safe
    across threads and processes."""

    def __init__(self, root: Path, *, keep_days: float = 30.0) -> None:
        self._root = private_dir(root)
        self._prune(keep_days * 86_400)

    def read(self, source_event_id: str) -> Note:
        try:
            content = self._path(source_event_id).read_bytes().decode("ascii", errors="replace")
        except FileNotFoundError:
            return Note(NoteState.NONE)
        if not content:  # the first version wrote an empty note after a 2xx
            return Note(NoteState.DELETED)
        word, _, detail = content.partition(":")
        state = _STATES.get(word)
        if state is None:  # unreadable: the safe reading is "a request may have left"
            return Note(NoteState.SENDING)
        if state is NoteState.GONE and not detail:  # the notes' earlier versions: a plain 404
            detail = "404"
        return Note(state, detail if state in FINAL_NOTES and _DETAIL.fullmatch(detail) else None)

    def state(self, source_event_id: str) -> NoteState:
        return self.read(source_event_id).state

    def note(self, source_event_id: str, state: NoteState, detail: str | None = None) -> None:
        if state is NoteState.NONE:
            raise ValueError("a note says what was done")
        if detail is not None and not _DETAIL.fullmatch(detail):
            raise ValueError("a note's detail is a short code")
        word = _WORDS[state] + (f":{detail}" if detail is not None and state in FINAL_NOTES else "")
        write_private_file(self._path(source_event_id), word.encode("ascii"))

    @contextmanager
    def claim(self, source_event_id: str) -> Iterator[bool]:
        path = self._path(source_event_id).with_suffix(_LOCK_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            os.utime(fd)  # fresh, so that pruning never removes a lock in use
            yield True
        finally:
            os.close(fd)  # releases the lock

    def _path(self, source_event_id: str) -> Path:
        return self._root / f"{hashlib.sha256(source_event_id.encode()).hexdigest()[:40]}{_SUFFIX}"

    def _prune(self, keep_seconds: float) -> None:
        cutoff = time.time() - keep_seconds
        removed = 0
        for pattern in (f"*{_SUFFIX}", f"*{_LOCK_SUFFIX}"):
            for path in self._root.glob(pattern):
                try:
                    if path.stat().st_mtime < cutoff:
                        path.unlink()
                        removed += 1
                except FileNotFoundError:
                    continue  # another process pruned it
        if removed:
            logger.info("old deletion notes removed", extra={"count": removed})

"""The erasure ledger: which accounts this store has erased, keyed so that it holds no personal data.

Each erased account has one entry, keyed by HMAC-SHA256 of its user id under `settings.erasure.
ledger_key` (hex). An entry holds that key, when the erasure started, how many passes finished and when
it completed: no user id, Array account id, requestId, key or address. Without the ledger key an entry
cannot be tied back to an account; with it, a reader that already holds a user id can ask whether that
account was erased, which is all the ledger answers.

Where it lives: one small JSON file per entry, `<state_dir>/erasure-ledger/<hmac>.json`, owner-only,
written whole (temporary file, fsync, rename, directory fsync); one that cannot be read or written (a
full disk, a read-only state directory) raises `ErasureStateError`, retryable. It sits outside the
entitlements table on purpose (the table is what is being erased, and its stream would carry the ledger
back into the lake), beside the consumer's quarantine, parked work and dead letters, so the consumer and
the worker must share `consumer.state_dir` (one host or one shared volume). Entries are never removed.
Do not rotate the ledger key: entries written under an old key are no longer recognised.

An erasure covers the account's data up to its completion, not the account forever: an erased user who
signs up again is new data. So the entry's window decides, by the event's own time (the stream's
ApproximateCreationDateTime, or an outcome's occurred_at):
- while an erasure is in progress (started, not completed), every event of the account is dropped;
- once it completed, an event at or before `completed_at + CLOCK_SKEW` is dropped (the account's old
  data, and the REMOVEs the erasure itself caused, whenever they arrive or are replayed: the stream's
  clock and the store's may differ by up to the channel's clock-skew allowance), and a later one lands;
- a new ERASE of a completed account starts a new cycle (`record_started(..., new_cycle=True)` on a
  first pass): the window opens again until that erasure completes.

The ledger is also where the store recognises its own second pass: pass one is recorded (`record_pass(
user, 1, ...)`) before the store re-enqueues the body, delayed, with a token only the store can make
(`pass_two_token`: HMAC-SHA256 of the body under a key derived from the ledger key); a message is a
second pass only when its token verifies and the ledger shows pass one finished. A message attribute
anyone can set is never enough.

Readers:
- the lake's landing: `erased_filter(ledger)` is a `Callable[[str | None, datetime | None], bool]`
  answering True for an event of an erased account inside its window (drop it) and False otherwise (a
  None user id is never erased; a None time is inside any window);
- the audits: `is_erased(user_id, at)` tells an erasure delete (of an entitlement row, which is otherwise
  never deleted, or of a cleanup record, otherwise only deleted by a reactivation or TTL) from a fault;
  a delete after the erasure's window is the new data's, and reported like any other.

Every answer reads the entry's current state: an erasure started or completed a moment ago by another
process is seen at once (an entry is re-read only when its file changed: one `stat`; an account with no
entry costs one HMAC and one failed `stat`).
"""

from __future__ import annotations

__all__ = ["LEDGER_DIR_NAME", "RECEIPTS_DIR_NAME", "ErasureLedger", "LedgerEntry", "erased_filter"]

import hmac
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from config import Settings
from processors.erasure._errors import state_files
from schema import private_dir, write_private_file
from schema.erasure import CHANNEL_CONSTANTS

LEDGER_DIR_NAME = "erasure-ledger"
RECEIPTS_DIR_NAME = "receipts"
_ID_LENGTH = 64
_HEX = frozenset("0123456789abcdef")
ERASE_PASSES = 2
_LOCK_STRIPES = 64
# The stream's clock (AWS's) and the store's may differ: a REMOVE the erasure caused just before its
# completion may carry a stream time up to this much later.
CLOCK_SKEW = timedelta(seconds=CHANNEL_CONSTANTS.clock_skew_allowance_seconds)
_PASS_TWO_LABEL = b"erasure pass-two token v1"


class LedgerEntry(BaseModel):
    """One erased account, with no personal data."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    version: int = 1
    started_at: datetime  # the first pass's start, the store's clock (aware UTC)
    passes: int = 0  # passes finished
    pass_one_at: datetime | None = None  # when the first pass finished (pass two is scheduled after it)
    completed_at: datetime | None = None  # when the last pass finished (the ACK follows)
    # What each pass of this cycle removed ("1", "2"), per store (counts only: `erase_counted`).
    removed: dict[str, dict[str, int]] = Field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.completed_at is not None

    def covers(self, at: datetime | None) -> bool:
        """Whether an event at `at` (None: unknown) is the erased data's: inside the erasure's window."""
        if self.completed_at is None or at is None:
            return True
        if at.tzinfo is None:  # a lake engine's naive UTC timestamp
            at = at.replace(tzinfo=UTC)
        return at <= self.completed_at + CLOCK_SKEW


class ErasureLedger:
    """The ledger under `root` (make it `settings.consumer.state_dir / LEDGER_DIR_NAME`). Thread-safe."""

    def __init__(self, root: Path, key: SecretStr) -> None:
        secret = key.get_secret_value().encode("utf-8")
        if not secret:
            raise ValueError("the erasure ledger key must not be empty")
        self._root = root
        self._secret = secret
        self._prefix = f"{root}{os.sep}"
        self._pass_two_key = hmac.digest(secret, _PASS_TWO_LABEL, "sha256")
        # ledger id -> (the file's inode, mtime_ns and size; its entry): re-read only when it changed.
        self._seen: dict[str, tuple[tuple[int, int, int], LedgerEntry]] = {}
        self._locks = tuple(threading.Lock() for _ in range(_LOCK_STRIPES))
        self._root_ready = False

    @classmethod
    def from_settings(cls, settings: Settings) -> ErasureLedger:
        """The deployed ledger: `<consumer.state_dir>/erasure-ledger` under `erasure.ledger_key`, the
        one the worker writes and the consumer's landing reads (`erased_filter(...)`)."""
        return cls(settings.consumer.state_dir / LEDGER_DIR_NAME, settings.erasure.ledger_key)

    def __repr__(self) -> str:
        return f"ErasureLedger(root={str(self._root)!r})"

    @property
    def root(self) -> Path:
        return self._root

    def ledger_id(self, user_id: str) -> str:
        """HMAC-SHA256 of the user id under the ledger key, as hex: the entry's only key."""
        return hmac.digest(self._secret, user_id.encode("utf-8"), "sha256").hex()

    def is_erased(self, user_id: str | None, at: datetime | None = None) -> bool:
        """Whether `user_id`'s data at `at` is an erasure's: an erasure started and, if it completed,
        `at` is at or before its completion (plus the clock-skew allowance). A None or empty user id never
        is; a None `at` is any time (so: whether an erasure ever started)."""
        if not user_id:
            return False
        entry = self._current(self.ledger_id(user_id))
        return entry is not None and entry.covers(at)

    def _current(self, ledger_id: str) -> LedgerEntry | None:
        """The entry as its file holds it now, re-read only when the file changed since last seen."""
        try:
            stat = os.stat(f"{self._prefix}{ledger_id}.json")  # a few microseconds, no pathlib
        except FileNotFoundError:
            return None
        except OSError:
            stat = None  # unreadable: read it (and fail retryably) below
        if stat is not None:
            seen = self._seen.get(ledger_id)
            version = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            if seen is not None and seen[0] == version:
                return seen[1]
        entry = self._read(ledger_id)
        if entry is not None and stat is not None:
            self._seen[ledger_id] = ((stat.st_ino, stat.st_mtime_ns, stat.st_size), entry)
        return entry

    def pass_two_token(self, body: str) -> str:
        """The token the store puts on its own delayed copy of `body`: HMAC-SHA256 under a key derived
        from the ledger key, so no publisher can make one."""
        return hmac.digest(self._pass_two_key, body.encode("utf-8", "surrogatepass"), "sha256").hex()

    def is_pass_two(self, user_id: str, body: str, token: str | None) -> bool:
        """Whether a message is this store's own second pass: its token verifies for its body and the
        ledger shows the account's first pass finished."""
        if not token or not hmac.compare_digest(token, self.pass_two_token(body)):
            return False
        entry = self.entry(user_id)
        return entry is not None and entry.passes >= 1

    def entry(self, user_id: str) -> LedgerEntry | None:
        return self._read(self.ledger_id(user_id))

    def record_started(self, user_id: str, at: datetime, *, new_cycle: bool = False) -> str:
        """Make sure the account has an entry (written before anything is deleted); returns its key.
        Idempotent: an entry in progress is kept as it is, and so is a completed one unless `new_cycle`
        (a first pass of a new ERASE after that erasure completed: its window opens again)."""
        ledger_id = self.ledger_id(user_id)
        with self._lock_for(ledger_id):
            current = self._read(ledger_id)
            if current is None or (new_cycle and current.completed):
                self._write(ledger_id, LedgerEntry(started_at=at))
        return ledger_id

    def record_pass(
        self, user_id: str, pass_number: int, at: datetime, *, removed: Mapping[str, int] | None = None
    ) -> LedgerEntry:
        """Note that pass `pass_number` finished and what it `removed`; the last pass completes the entry.
        Idempotent: a repeated pass (a redelivery) keeps, per store, the most any run of it removed (a
        repeat finds nothing more to remove)."""
        ledger_id = self.ledger_id(user_id)
        with self._lock_for(ledger_id):
            current = self._read(ledger_id) or LedgerEntry(started_at=at)
            passes = max(current.passes, pass_number)
            completed_at = current.completed_at
            if passes >= ERASE_PASSES and completed_at is None:
                completed_at = at
            pass_one_at = current.pass_one_at or (at if pass_number >= 1 else None)
            counts = {number: dict(stores) for number, stores in current.removed.items()}
            this_pass = counts.setdefault(str(pass_number), {})
            for store, count in (removed or {}).items():
                this_pass[store] = max(this_pass.get(store, 0), count)
            if not this_pass:
                del counts[str(pass_number)]
            updated = current.model_copy(
                update={
                    "passes": passes,
                    "completed_at": completed_at,
                    "pass_one_at": pass_one_at,
                    "removed": counts,
                }
            )
            if updated != current or not self._path(ledger_id).exists():
                self._write(ledger_id, updated)
        return updated

    def record_receipt(self, user_id: str, verified_at: datetime, receipt: str) -> Path:
        """Keep an erasure's receipt (JSON with no personal data: `processors.erasure._receipt`) durably
        beside its entry, one file per verification: `receipts/<ledger id>.<epoch ms>.json`."""
        ledger_id = self.ledger_id(user_id)
        folder = self._root / RECEIPTS_DIR_NAME
        path = folder / f"{ledger_id}.{int(verified_at.timestamp() * 1000)}.json"
        with state_files("receipt"):
            self._ensure_root()
            private_dir(folder)
            write_private_file(path, receipt.encode("utf-8"))
        return path

    def receipts(self, user_id: str) -> list[str]:
        """The account's receipts, oldest first (JSON text)."""
        folder = self._root / RECEIPTS_DIR_NAME
        ledger_id = self.ledger_id(user_id)
        with state_files("receipt"):
            if not folder.exists():
                return []
            paths = sorted(folder.glob(f"{ledger_id}.*.json"), key=lambda p: int(p.name.split(".")[1]))
            return [path.read_text("utf-8") for path in paths]

    def ids(self) -> Iterator[str]:
        """Every entry's key (no personal data)."""
        if not self._root.exists():
            return
        for path in sorted(self._root.glob("*.json")):
            if self._valid_id(path.stem):
                yield path.stem

    def count(self) -> int:
        return sum(1 for _ in self.ids())

    # -- files ------------------------------------------------------------------------------------

    @staticmethod
    def _valid_id(value: str) -> bool:
        return len(value) == _ID_LENGTH and set(value) <= _HEX

    def _lock_for(self, ledger_id: str) -> threading.Lock:
        return self._locks[int(ledger_id[:4], 16) % _LOCK_STRIPES]

    def _path(self, ledger_id: str) -> Path:
        return self._root / f"{ledger_id}.json"

    def _read(self, ledger_id: str) -> LedgerEntry | None:
        with state_files("ledger"):
            try:
                data = self._path(ledger_id).read_bytes()
            except FileNotFoundError:
                return None
            try:
                return LedgerEntry.model_validate_json(data, strict=False)
            except ValidationError:
                # A damaged entry still says the account was erased; the next write repairs it.
                mtime = self._path(ledger_id).stat().st_mtime
                return LedgerEntry(started_at=datetime.fromtimestamp(mtime, UTC))

    def _ensure_root(self) -> None:
        if self._root_ready:
            return
        private_dir(self._root)
        self._root_ready = True

    def _write(self, ledger_id: str, entry: LedgerEntry) -> None:
        data = json.dumps(entry.model_dump(mode="json"), sort_keys=True).encode()
        with state_files("ledger"):
            self._ensure_root()
            write_private_file(self._path(ledger_id), data)


def erased_filter(ledger: ErasureLedger) -> Callable[[str | None, datetime | None], bool]:
    """The landing-time filter: `drop(user_id, at)` is True when the event (at its own time `at`) is an
    erased account's data, inside its erasure's window (module docstring), so the lake handler (or any
    sink) skips it; an erased user's events after the erasure completed land. Wire it where events land:

        drop = erased_filter(ErasureLedger.from_settings(settings))
        if not drop(event.user_id, event.created_at): lake_handler.add(event)
    """
    return ledger.is_erased

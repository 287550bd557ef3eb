"""The consumer's own copies of stream records, all under `settings.consumer.state_dir`: its quarantine
(records it could not decode), its dead letters (records a handler refused for their own content) and
its parked work (batches a handler could not flush).

Each holds raw stream records. Whether one is an erased user's is `ErasedKeys.record_belongs`: the
user its event names when it decodes, else a match of its bytes and their JSON-unescaped text against
the erased keys. No content can stop the erasure: a record that cannot be ruled out is erased.

Erasing deletes a quarantined or dead-lettered record's file, and rewrites a parked batch without the
user's records (a new file first, then the old one removed, so a crash in between leaves a duplicate the
replay tolerates, never a loss); a batch left empty is removed. A store file that cannot be read as a
store document (damaged, hand-edited) is skipped by the store's listing, and every file the listing
did not yield is matched whole, on its bytes, its unescaped text and every base64 text in it (the raw
records are kept in base64), and removed when it names a key: a parked batch whole, whatever else it
holds, since its records cannot be told apart without reading it. Over-matching is the safe side. A
temporary file a crash left behind mid-write (`.<name>.<random>.tmp`, `schema._files`) holds a record
no store lists: one older than `LEFTOVER_AGE_SECONDS` (so never a write in progress) is matched whole
the same way.

A file that cannot be read or written (a full disk, a read-only state directory) raises
`ErasureStateError`, retryable: the ERASE is left for SQS to redeliver.
"""

from __future__ import annotations

__all__ = ["LEFTOVER_AGE_SECONDS", "ConsumerStores", "StoreCounts"]

import base64
import binascii
import logging
import re
import time
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from config import ConsumerSettings
from pipeline.dead_letter import DeadLetters
from pipeline.parking import ParkedBatch, ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from processors.erasure._errors import state_files
from processors.erasure._record_match import ErasedKeys

logger = logging.getLogger(__name__)

# A temporary file older than this is no write in progress (a write takes milliseconds) but a leftover.
LEFTOVER_AGE_SECONDS = 300.0
_LEFTOVER_PATTERN = ".*.tmp"
# A JSON string of base64 text, long enough to hold a record (a stored record's `raw_base64`).
_BASE64_TEXT = re.compile(rb'"([A-Za-z0-9+/]{16,}={0,2})')


class _Stored(Protocol):
    """A quarantined or dead-lettered record."""

    @property
    def raw(self) -> bytes: ...
    @property
    def stream_arn(self) -> str: ...
    @property
    def shard_id(self) -> str: ...
    @property
    def sequence_number(self) -> str: ...
    @property
    def path(self) -> Path: ...


_R = TypeVar("_R", bound=_Stored)


class _RecordStore(Protocol[_R]):
    """The quarantine or the dead letters: one record a file."""

    @property
    def root(self) -> Path: ...
    def __iter__(self) -> Iterator[_R]: ...
    def remove(self, record: _R) -> None: ...


@dataclass(frozen=True, slots=True)
class StoreCounts:
    quarantined_removed: int = 0
    parked_records_removed: int = 0
    parked_files_changed: int = 0
    dead_letters_removed: int = 0
    unreadable_files_removed: int = 0
    leftover_files_removed: int = 0


def _names_in_file(keys: ErasedKeys, data: bytes) -> bool:
    """Whether a store file that cannot be read as a document names one of the keys."""
    if keys.named_in(data):
        return True
    for match in _BASE64_TEXT.finditer(data):
        text = match.group(1)
        text = text[: len(text) - len(text) % 4]  # a truncated file keeps its whole quanta
        try:
            decoded = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            continue
        if keys.named_in(decoded):
            return True
    return False


def _unlisted(root: Path, listed: Collection[Path]) -> Iterator[Path]:
    """The store files under `root` not in `listed`; temporary files of a write in progress (`.*.tmp`)
    are never among them."""
    if not root.exists():
        return
    for path in sorted(root.rglob("*.json")):
        if path not in listed and path.is_file():
            yield path


def _unreadable_removed(root: Path, keys: ErasedKeys, listed: Collection[Path]) -> int:
    """The store files the store did not list, matched whole; those naming a key are removed."""
    removed = 0
    for path in _unlisted(root, listed):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        if _names_in_file(keys, data):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def _leftovers(root: Path, *, older_than: float | None) -> Iterator[tuple[Path, bytes]]:
    """The temporary files a crash left under `root` (modified before `older_than`, if given)."""
    if not root.exists():
        return
    for path in sorted(root.rglob(_LEFTOVER_PATTERN)):
        try:
            if not path.is_file() or (older_than is not None and path.stat().st_mtime >= older_than):
                continue
            yield path, path.read_bytes()
        except FileNotFoundError:  # renamed into place or removed meanwhile
            continue


class ConsumerStores:
    """The quarantine at `quarantine_dir`, the parked work at `parked_dir` and the dead letters at
    `dead_letter_dir`: `from_settings` takes all three from the consumer's settings."""

    def __init__(self, quarantine_dir: Path, parked_dir: Path, dead_letter_dir: Path) -> None:
        self._quarantine = Quarantine(quarantine_dir)
        self._parked = ParkedWork(parked_dir)
        self._parked_dir = parked_dir
        self._dead_letters = DeadLetters(dead_letter_dir)
        self._roots = (quarantine_dir, parked_dir, dead_letter_dir)

    @classmethod
    def from_settings(cls, consumer: ConsumerSettings) -> ConsumerStores:
        """The deployed stores, where the consumer keeps them."""
        return cls(consumer.quarantine_dir, consumer.parked_dir, consumer.dead_letter_dir)

    def erase(self, user_ids: Collection[str], *, array_account_ids: Iterable[str] = ()) -> StoreCounts:
        """Remove these users' records from every store. `array_account_ids`: the Array accounts the
        erasure found in their rows, matched too in records that do not decode. Idempotent."""
        keys = ErasedKeys.of(user_ids, array_account_ids)
        if not keys:
            return StoreCounts()
        with state_files("consumer-stores"):
            quarantined, unreadable_q = self._erase_records(self._quarantine, keys)
            dead, unreadable_d = self._erase_records(self._dead_letters, keys)
            removed, changed, unreadable_p = self._erase_parked(keys)
            leftovers = self._erase_leftovers(keys)
        counts = StoreCounts(
            quarantined, removed, changed, dead, unreadable_q + unreadable_d + unreadable_p, leftovers
        )
        if quarantined or removed or dead or counts.unreadable_files_removed or leftovers:
            logger.info(
                "erasure removed consumer copies",
                extra={
                    "quarantined": quarantined,
                    "parked_records": removed,
                    "parked_files": changed,
                    "dead_letters": dead,
                    "unreadable_files": counts.unreadable_files_removed,
                    "leftover_files": leftovers,
                },
            )
        return counts

    def _erase_leftovers(self, keys: ErasedKeys) -> int:
        older_than = time.time() - LEFTOVER_AGE_SECONDS  # file times are the file system's clock
        removed = 0
        for root in self._roots:
            for path, data in _leftovers(root, older_than=older_than):
                if _names_in_file(keys, data):
                    path.unlink(missing_ok=True)
                    removed += 1
        return removed

    def scan(self, user_id: str) -> dict[str, int]:
        """The verifier's scan, per store (`quarantine`, `dead_letters`, `parked`, `leftover_files`): 1
        when the store still holds a record of the user (each store stops at its first), else 0."""
        keys = ErasedKeys.of((user_id,))
        if not keys:
            return dict.fromkeys(("quarantine", "dead_letters", "parked", "leftover_files"), 0)
        with state_files("consumer-stores-read"):
            return {
                "quarantine": int(self._records_hold(self._quarantine, keys)),
                "dead_letters": int(self._records_hold(self._dead_letters, keys)),
                "parked": int(self._parked_holds(keys)),
                "leftover_files": int(
                    any(
                        _names_in_file(keys, data)
                        for root in self._roots
                        for _, data in _leftovers(root, older_than=None)
                    )
                ),
            }

    def holds(self, user_id: str) -> bool:
        """Whether any store holds a record of this user (a file no store can read, or a temporary file
        of any age, counts when it names the user)."""
        keys = ErasedKeys.of((user_id,))
        if not keys:
            return False
        with state_files("consumer-stores-read"):
            return (
                self._records_hold(self._quarantine, keys)
                or self._records_hold(self._dead_letters, keys)
                or self._parked_holds(keys)
                or any(
                    _names_in_file(keys, data)
                    for root in self._roots
                    for _, data in _leftovers(root, older_than=None)
                )
            )

    # -- quarantine and dead letters: one record a file ---------------------------------------------

    @staticmethod
    def _erase_records(store: _RecordStore[_R], keys: ErasedKeys) -> tuple[int, int]:
        """(records removed, unreadable files removed)."""
        removed = 0
        listed: set[Path] = set()
        try:
            for record in store:
                listed.add(record.path)
                if _belongs(keys, record):
                    store.remove(record)
                    removed += 1
        except OSError:
            raise
        except Exception as error:  # a listing that stops: the rest are read whole instead
            _listing_stopped(error)
        # The files the store skipped as damaged (or never reached) are matched whole.
        return removed, _unreadable_removed(store.root, keys, listed)

    @staticmethod
    def _records_hold(store: _RecordStore[_R], keys: ErasedKeys) -> bool:
        listed: set[Path] = set()
        try:
            for record in store:
                listed.add(record.path)
                if _belongs(keys, record):
                    return True
        except OSError:
            raise
        except Exception as error:
            _listing_stopped(error)
        return _any_unreadable_names(store.root, keys, listed)

    # -- parked work: batches of records ------------------------------------------------------------

    def _erase_parked(self, keys: ErasedKeys) -> tuple[int, int, int]:
        """(records removed, files changed, unreadable files removed)."""
        removed = changed = 0
        listed: set[Path] = set()
        try:
            for batch in self._parked:
                listed.add(batch.path)
                kept = [raw for raw in batch.records if not _parked_belongs(keys, batch, raw)]
                if len(kept) == len(batch.records):
                    continue
                removed += len(batch.records) - len(kept)
                changed += 1
                rewritten = self._rewrite(batch, kept)
                if rewritten is not None:
                    listed.add(rewritten)  # holds only records ruled out: never matched whole
        except OSError:
            raise
        except Exception as error:  # a listing that stops: the rest are read whole instead
            _listing_stopped(error)
        # The batches the store skipped as damaged (or never reached) are matched whole.
        return removed, changed, _unreadable_removed(self._parked_dir, keys, listed)

    def _rewrite(self, batch: ParkedBatch, kept: list[RawRecord]) -> Path | None:
        """The batch without the erased records: its new file, or None when none is left."""
        if not kept:
            self._parked.remove(batch)
            return None
        new_path = self._parked.park(
            handler=batch.handler,
            stream_arn=batch.stream_arn,
            shard_id=batch.shard_id,
            records=kept,
            reason=batch.reason,
        )
        if new_path != batch.path:
            self._parked.remove(batch)
        return new_path

    def _parked_holds(self, keys: ErasedKeys) -> bool:
        listed: set[Path] = set()
        try:
            for batch in self._parked:
                listed.add(batch.path)
                if any(_parked_belongs(keys, batch, raw) for raw in batch.records):
                    return True
        except OSError:
            raise
        except Exception as error:
            _listing_stopped(error)
        return _any_unreadable_names(self._parked_dir, keys, listed)


def _listing_stopped(error: Exception) -> None:
    logger.warning(
        "consumer store listing stopped; the rest matched whole", extra={"error": type(error).__name__}
    )


def _belongs(keys: ErasedKeys, record: _Stored) -> bool:
    return keys.record_belongs(
        record.raw,
        stream_arn=record.stream_arn,
        shard_id=record.shard_id,
        sequence_number=record.sequence_number,
    )


def _parked_belongs(keys: ErasedKeys, batch: ParkedBatch, raw: RawRecord) -> bool:
    return keys.record_belongs(
        raw.data, stream_arn=batch.stream_arn, shard_id=batch.shard_id, sequence_number=raw.sequence_number
    )


def _any_unreadable_names(root: Path, keys: ErasedKeys, listed: Collection[Path]) -> bool:
    for path in _unlisted(root, listed):
        try:
            if _names_in_file(keys, path.read_bytes()):
                return True
        except FileNotFoundError:
            continue
    return False

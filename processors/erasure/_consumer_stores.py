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

One erasure or one verifier's scan serves a batch of users: each store is read once for all of them,
and what was removed or found is told per user (`KeysByUser`: a record naming two of them counts for
each), so each erasure's receipt says what was removed of that user.
"""

from __future__ import annotations

__all__ = ["LEFTOVER_AGE_SECONDS", "SCANNED_STORES", "ConsumerStores", "StoreCounts"]

import base64
import binascii
import logging
import re
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from config import ConsumerSettings
from pipeline import DeadLetters, ParkedBatch, ParkedWork, Quarantine, RawRecord
from processors.erasure._errors import state_files
from processors.erasure._record_match import ErasedKeys, KeysByUser

logger = logging.getLogger(__name__)

# A temporary file older than this is no write in progress (a write takes milliseconds) but a leftover.
LEFTOVER_AGE_SECONDS = 300.0
_LEFTOVER_PATTERN = ".*.tmp"
# A JSON string of base64 text, long enough to hold a record (a stored record's `raw_base64`).
_BASE64_TEXT = re.compile(rb'"([A-Za-z0-9+/]{16,}={0,2})')
SCANNED_STORES: tuple[str, ...] = ("quarantine", "dead_letters", "parked", "leftover_files")


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
    """What an erasure removed: in all, and per user in `by_user` (a record naming two users of the
    batch counts for each)."""

    quarantined_removed: int = 0
    parked_records_removed: int = 0
    parked_files_changed: int = 0
    dead_letters_removed: int = 0
    unreadable_files_removed: int = 0
    leftover_files_removed: int = 0
    by_user: Mapping[str, StoreCounts] = field(default_factory=dict)


class _Tally:
    """Per-user counts of one erasure, by `StoreCounts` field name."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {}

    def add(self, owners: Iterable[str], counter: str, amount: int = 1) -> None:
        for user_id in owners:
            per_user = self.counts.setdefault(user_id, {})
            per_user[counter] = per_user.get(counter, 0) + amount

    def by_user(self) -> dict[str, StoreCounts]:
        return {
            user_id: StoreCounts(
                quarantined_removed=counts.get("quarantined_removed", 0),
                parked_records_removed=counts.get("parked_records_removed", 0),
                parked_files_changed=counts.get("parked_files_changed", 0),
                dead_letters_removed=counts.get("dead_letters_removed", 0),
                unreadable_files_removed=counts.get("unreadable_files_removed", 0),
                leftover_files_removed=counts.get("leftover_files_removed", 0),
            )
            for user_id, counts in self.counts.items()
        }


def _owners_in_file(keys: KeysByUser, data: bytes) -> frozenset[str]:
    """The users a store file that cannot be read as a document names (`_names_in_file`, per user)."""
    return keys.owners(lambda each: _names_in_file(each, data))


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


def _unreadable_removed(root: Path, keys: KeysByUser, listed: Collection[Path], tally: _Tally) -> int:
    """The store files the store did not list, matched whole; those naming a key are removed."""
    removed = 0
    for path in _unlisted(root, listed):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        owners = _owners_in_file(keys, data)
        if owners:
            path.unlink(missing_ok=True)
            removed += 1
            tally.add(owners, "unreadable_files_removed")
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

    def erase(
        self, user_ids: Collection[str], *, array_account_ids: Mapping[str, Iterable[str]] | None = None
    ) -> StoreCounts:
        """Remove these users' records from every store. `array_account_ids`: per user, the Array
        accounts the erasure found in their rows, matched too (as that user's) in records that do not
        decode. Idempotent."""
        keys = KeysByUser.of(user_ids, array_account_ids)
        if not keys:
            return StoreCounts()
        tally = _Tally()
        with state_files("consumer-stores"):
            quarantined, unreadable_q = self._erase_records(
                self._quarantine, keys, tally, "quarantined_removed"
            )
            dead, unreadable_d = self._erase_records(self._dead_letters, keys, tally, "dead_letters_removed")
            removed, changed, unreadable_p = self._erase_parked(keys, tally)
            leftovers = self._erase_leftovers(keys, tally)
        counts = StoreCounts(
            quarantined,
            removed,
            changed,
            dead,
            unreadable_q + unreadable_d + unreadable_p,
            leftovers,
            tally.by_user(),
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

    def _erase_leftovers(self, keys: KeysByUser, tally: _Tally) -> int:
        older_than = time.time() - LEFTOVER_AGE_SECONDS  # file times are the file system's clock
        removed = 0
        for root in self._roots:
            for path, data in _leftovers(root, older_than=older_than):
                owners = _owners_in_file(keys, data)
                if owners:
                    path.unlink(missing_ok=True)
                    removed += 1
                    tally.add(owners, "leftover_files_removed")
        return removed

    def scan(self, user_id: str) -> dict[str, int]:
        """`scan_for` of one user."""
        return self.scan_for((user_id,)).get(user_id, dict.fromkeys(SCANNED_STORES, 0))

    def scan_for(self, user_ids: Collection[str]) -> dict[str, dict[str, int]]:
        """The verifier's scan of a batch, each store read once: per user, per store (`quarantine`,
        `dead_letters`, `parked`, `leftover_files`), how many records (files, for leftovers) of the
        user the store still holds."""
        keys = KeysByUser.of(user_ids)
        found = {user_id: dict.fromkeys(SCANNED_STORES, 0) for user_id in keys.each}
        if not keys:
            return found

        def count(store: str) -> Callable[[Iterable[str]], None]:
            def add(owners: Iterable[str]) -> None:
                for user_id in owners:
                    found[user_id][store] += 1

            return add

        with state_files("consumer-stores-read"):
            self._records_scanned(self._quarantine, keys, count("quarantine"))
            self._records_scanned(self._dead_letters, keys, count("dead_letters"))
            self._parked_scanned(keys, count("parked"))
            leftover = count("leftover_files")
            for root in self._roots:
                for _, data in _leftovers(root, older_than=None):
                    leftover(_owners_in_file(keys, data))
        return found

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
    def _erase_records(
        store: _RecordStore[_R], keys: KeysByUser, tally: _Tally, counter: str
    ) -> tuple[int, int]:
        """(records removed, unreadable files removed)."""
        removed = 0
        listed: set[Path] = set()
        try:
            for record in store:
                listed.add(record.path)
                owners = _owners(keys, record)
                if owners:
                    store.remove(record)
                    removed += 1
                    tally.add(owners, counter)
        except OSError:
            raise
        except Exception as error:  # a listing that stops: the rest are read whole instead
            _listing_stopped(error)
        # The files the store skipped as damaged (or never reached) are matched whole.
        return removed, _unreadable_removed(store.root, keys, listed, tally)

    @staticmethod
    def _records_scanned(
        store: _RecordStore[_R], keys: KeysByUser, found: Callable[[Iterable[str]], None]
    ) -> None:
        listed: set[Path] = set()
        try:
            for record in store:
                listed.add(record.path)
                found(_owners(keys, record))
        except OSError:
            raise
        except Exception as error:
            _listing_stopped(error)
        _unreadable_scanned(store.root, keys, listed, found)

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

    def _erase_parked(self, keys: KeysByUser, tally: _Tally) -> tuple[int, int, int]:
        """(records removed, files changed, unreadable files removed)."""
        removed = changed = 0
        listed: set[Path] = set()
        try:
            for batch in self._parked:
                listed.add(batch.path)
                kept: list[RawRecord] = []
                touched: set[str] = set()
                for raw in batch.records:
                    owners = _parked_owners(keys, batch, raw)
                    if not owners:
                        kept.append(raw)
                        continue
                    tally.add(owners, "parked_records_removed")
                    touched |= owners
                if len(kept) == len(batch.records):
                    continue
                removed += len(batch.records) - len(kept)
                changed += 1
                tally.add(touched, "parked_files_changed")
                rewritten = self._rewrite(batch, kept)
                if rewritten is not None:
                    listed.add(rewritten)  # holds only records ruled out: never matched whole
        except OSError:
            raise
        except Exception as error:  # a listing that stops: the rest are read whole instead
            _listing_stopped(error)
        # The batches the store skipped as damaged (or never reached) are matched whole.
        return removed, changed, _unreadable_removed(self._parked_dir, keys, listed, tally)

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

    def _parked_scanned(self, keys: KeysByUser, found: Callable[[Iterable[str]], None]) -> None:
        listed: set[Path] = set()
        try:
            for batch in self._parked:
                listed.add(batch.path)
                for raw in batch.records:
                    found(_parked_owners(keys, batch, raw))
        except OSError:
            raise
        except Exception as error:
            _listing_stopped(error)
        _unreadable_scanned(self._parked_dir, keys, listed, found)

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


def _owners(keys: KeysByUser, record: _Stored) -> frozenset[str]:
    return keys.record_owners(
        record.raw,
        stream_arn=record.stream_arn,
        shard_id=record.shard_id,
        sequence_number=record.sequence_number,
    )


def _parked_owners(keys: KeysByUser, batch: ParkedBatch, raw: RawRecord) -> frozenset[str]:
    return keys.record_owners(
        raw.data, stream_arn=batch.stream_arn, shard_id=batch.shard_id, sequence_number=raw.sequence_number
    )


def _unreadable_scanned(
    root: Path, keys: KeysByUser, listed: Collection[Path], found: Callable[[Iterable[str]], None]
) -> None:
    for path in _unlisted(root, listed):
        try:
            found(_owners_in_file(keys, path.read_bytes()))
        except FileNotFoundError:
            continue


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

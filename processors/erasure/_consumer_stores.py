"""The consumer's own copies of stream records: its quarantine (records it could not decode) and its
parked work (batches a handler could not flush), both under `settings.consumer.state_dir`.

Both hold raw stream records (base64 of the JSON of the whole record). A record belongs to a user when
`pipeline.decode.decode_record` types it with that user id. A quarantined record is one that did not
decode, so when decoding fails the raw bytes are searched instead: the record belongs to the user when it
contains the partition key `USER#<id>` or the id as a JSON string (over-matching a record that merely
names the id is the safe side for an erasure).

Erasing deletes a quarantined record's file, and rewrites a parked batch without the user's records (a
new file first, then the old one removed, so a crash in between leaves a duplicate the replay tolerates,
never a loss); a batch left empty is removed.
"""

from __future__ import annotations

__all__ = ["ConsumerStores", "StoreCounts"]

import json
import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from pipeline.decode import decode_record
from pipeline.errors import DecodeError
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine, QuarantinedRecord, safe_name, sequence_file_stem
from schema.table import USER_PK_PREFIX

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoreCounts:
    quarantined_removed: int = 0
    parked_records_removed: int = 0
    parked_files_changed: int = 0


def _needles(user_ids: Iterable[str]) -> tuple[bytes, ...]:
    needles: list[bytes] = []
    for user_id in user_ids:
        quoted = json.dumps(user_id)  # the id as JSON writes it, escapes included
        needles.append(json.dumps(f"{USER_PK_PREFIX}{user_id}")[1:-1].encode())
        needles.append(quoted.encode())
    return tuple(needles)


def _belongs(
    raw: bytes,
    user_ids: Collection[str],
    needles: tuple[bytes, ...],
    *,
    stream_arn: str,
    shard_id: str,
    sequence_number: str,
) -> bool:
    try:
        event = decode_record(raw, stream_arn=stream_arn, shard_id=shard_id, sequence_number=sequence_number)
    except DecodeError:
        return any(needle in raw for needle in needles)
    return event.user_id is not None and event.user_id in user_ids


class ConsumerStores:
    """The quarantine at `quarantine_dir` and the parked work at `parked_dir` (ConsumerSettings')."""

    def __init__(self, quarantine_dir: Path, parked_dir: Path) -> None:
        self._quarantine_dir = quarantine_dir
        self._parked_dir = parked_dir

    def erase(self, user_ids: Collection[str]) -> StoreCounts:
        """Remove these users' records from both stores. Idempotent."""
        ids = frozenset(user_ids)
        if not ids:
            return StoreCounts()
        needles = _needles(sorted(ids))
        quarantined = self._erase_quarantined(ids, needles)
        removed, changed = self._erase_parked(ids, needles)
        counts = StoreCounts(quarantined, removed, changed)
        if quarantined or removed:
            logger.info(
                "erasure removed consumer copies",
                extra={"quarantined": quarantined, "parked_records": removed, "parked_files": changed},
            )
        return counts

    def holds(self, user_id: str) -> bool:
        """Whether either store holds a record of this user."""
        ids = frozenset((user_id,))
        needles = _needles((user_id,))
        for record in Quarantine(self._quarantine_dir):
            if self._quarantined_belongs(record, ids, needles):
                return True
        for batch in ParkedWork(self._parked_dir):
            for raw in batch.records:
                if _belongs(
                    raw.data,
                    ids,
                    needles,
                    stream_arn=batch.stream_arn,
                    shard_id=batch.shard_id,
                    sequence_number=raw.sequence_number,
                ):
                    return True
        return False

    @staticmethod
    def _quarantined_belongs(
        record: QuarantinedRecord, ids: Collection[str], needles: tuple[bytes, ...]
    ) -> bool:
        return _belongs(
            record.raw,
            ids,
            needles,
            stream_arn=record.stream_arn,
            shard_id=record.shard_id,
            sequence_number=record.sequence_number,
        )

    def _erase_quarantined(self, ids: Collection[str], needles: tuple[bytes, ...]) -> int:
        removed = 0
        for record in Quarantine(self._quarantine_dir):
            if not self._quarantined_belongs(record, ids, needles):
                continue
            # Quarantine names each file by shard and sequence number (pipeline.quarantine's helpers).
            path = (
                self._quarantine_dir
                / safe_name(record.shard_id)
                / f"{sequence_file_stem(record.sequence_number)}.json"
            )
            path.unlink(missing_ok=True)
            removed += 1
        return removed

    def _erase_parked(self, ids: Collection[str], needles: tuple[bytes, ...]) -> tuple[int, int]:
        parked = ParkedWork(self._parked_dir)
        removed = changed = 0
        for batch in list(parked):
            kept: list[RawRecord] = [
                raw
                for raw in batch.records
                if not _belongs(
                    raw.data,
                    ids,
                    needles,
                    stream_arn=batch.stream_arn,
                    shard_id=batch.shard_id,
                    sequence_number=raw.sequence_number,
                )
            ]
            if len(kept) == len(batch.records):
                continue
            removed += len(batch.records) - len(kept)
            changed += 1
            if kept:
                new_path = parked.park(
                    handler=batch.handler,
                    stream_arn=batch.stream_arn,
                    shard_id=batch.shard_id,
                    records=kept,
                    reason=batch.reason,
                )
                if new_path != batch.path:
                    parked.remove(batch)
            else:
                parked.remove(batch)
        return removed, changed

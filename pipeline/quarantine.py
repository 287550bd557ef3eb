"""Records the consumer cannot decode: kept with their raw bytes and the reason, never dropped.

The store lives outside the lake (it holds raw customer data) and is readable by its owner only (files
0600, folders 0700). A record quarantined twice (a replay) lands on the same file and the first copy is
kept, so counts stay honest. A record re-driven after a fix is removed once it is handled.
"""

from __future__ import annotations

__all__ = ["Quarantine", "QuarantinedRecord", "safe_name", "sequence_file_stem"]

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline._stored_records import (
    base64_field,
    damaged_files,
    read_stored,
    record_path,
    safe_name,
    sequence_file_stem,
    store_document,
    text_field,
)


@dataclass(frozen=True)
class QuarantinedRecord:
    raw: bytes
    reason: str
    stream_arn: str
    shard_id: str
    sequence_number: str
    quarantined_at: str
    path: Path


_PATTERN = "*/*.json"


def _record(path: Path, doc: object) -> QuarantinedRecord:
    return QuarantinedRecord(
        raw=base64_field(doc, "raw_base64"),
        reason=text_field(doc, "reason"),
        stream_arn=text_field(doc, "stream_arn"),
        shard_id=text_field(doc, "shard_id"),
        sequence_number=text_field(doc, "sequence_number"),
        quarantined_at=text_field(doc, "quarantined_at"),
        path=path,
    )


class Quarantine:
    def __init__(self, root: Path) -> None:
        self._root = root

    @property
    def root(self) -> Path:
        return self._root

    def put(self, *, raw: bytes, reason: str, stream_arn: str, shard_id: str, sequence_number: str) -> Path:
        return store_document(
            self._root,
            record_path(self._root, shard_id, sequence_number=sequence_number),
            raw=raw,
            stamp_field="quarantined_at",
            reason=reason,
            stream_arn=stream_arn,
            shard_id=shard_id,
            sequence_number=sequence_number,
        )

    def __iter__(self) -> Iterator[QuarantinedRecord]:
        """Every readable record; a damaged file is logged by path and skipped (see `damaged`)."""
        return read_stored(self._root, _PATTERN, _record)

    def damaged(self) -> list[Path]:
        """The files that cannot be read as a quarantined record (left in place, never listed)."""
        return damaged_files(self._root, _PATTERN, _record)

    def count(self) -> int:
        return sum(1 for _ in self._root.glob(_PATTERN)) if self._root.exists() else 0

    def remove(self, record: QuarantinedRecord) -> None:
        record.path.unlink(missing_ok=True)

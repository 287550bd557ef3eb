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
    read_documents,
    record_path,
    safe_name,
    sequence_file_stem,
    store_document,
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
        for path, doc, raw in read_documents(self._root, "*/*.json"):
            yield QuarantinedRecord(
                raw=raw,
                reason=doc["reason"],
                stream_arn=doc["stream_arn"],
                shard_id=doc["shard_id"],
                sequence_number=doc["sequence_number"],
                quarantined_at=doc["quarantined_at"],
                path=path,
            )

    def count(self) -> int:
        return sum(1 for _ in self._root.glob("*/*.json")) if self._root.exists() else 0

    def remove(self, record: QuarantinedRecord) -> None:
        record.path.unlink(missing_ok=True)

"""Records a handler refused for their own content (`schema.errors.RecordRejected`): kept per handler.

A dead letter holds the raw bytes, the handler that refused the record and its reason (words only), so
the record can be inspected, erased and re-driven to that handler after a fix. Every other record and
handler carried on, and the shard checkpointed past it. Files are 0600 and folders 0700 (raw customer
data); a record dead-lettered twice for the same handler lands on the same file, the first copy kept.
"""

from __future__ import annotations

__all__ = ["DeadLetter", "DeadLetters"]

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline._stored_records import (
    base64_field,
    damaged_files,
    read_stored,
    record_path,
    store_document,
    text_field,
)


@dataclass(frozen=True)
class DeadLetter:
    raw: bytes
    reason: str
    handler: str
    stream_arn: str
    shard_id: str
    sequence_number: str
    dead_lettered_at: str
    path: Path


_PATTERN = "*/*/*.json"


def _letter(path: Path, doc: object) -> DeadLetter:
    return DeadLetter(
        raw=base64_field(doc, "raw_base64"),
        reason=text_field(doc, "reason"),
        handler=text_field(doc, "handler"),
        stream_arn=text_field(doc, "stream_arn"),
        shard_id=text_field(doc, "shard_id"),
        sequence_number=text_field(doc, "sequence_number"),
        dead_lettered_at=text_field(doc, "dead_lettered_at"),
        path=path,
    )


class DeadLetters:
    def __init__(self, root: Path) -> None:
        self._root = root

    @property
    def root(self) -> Path:
        return self._root

    def put(
        self, *, raw: bytes, reason: str, handler: str, stream_arn: str, shard_id: str, sequence_number: str
    ) -> Path:
        return store_document(
            self._root,
            record_path(self._root, handler, shard_id, sequence_number=sequence_number),
            raw=raw,
            stamp_field="dead_lettered_at",
            reason=reason,
            handler=handler,
            stream_arn=stream_arn,
            shard_id=shard_id,
            sequence_number=sequence_number,
        )

    def __iter__(self) -> Iterator[DeadLetter]:
        """Every readable letter; a damaged file is logged by path and skipped (see `damaged`)."""
        return read_stored(self._root, _PATTERN, _letter)

    def damaged(self) -> list[Path]:
        """The files that cannot be read as a dead letter (left in place, never listed)."""
        return damaged_files(self._root, _PATTERN, _letter)

    def count(self) -> int:
        return sum(1 for _ in self._root.glob(_PATTERN)) if self._root.exists() else 0

    def remove(self, record: DeadLetter) -> None:
        record.path.unlink(missing_ok=True)

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

from pipeline._stored_records import read_documents, record_path, store_document


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
        for path, doc, raw in read_documents(self._root, "*/*/*.json"):
            yield DeadLetter(
                raw=raw,
                reason=doc["reason"],
                handler=doc["handler"],
                stream_arn=doc["stream_arn"],
                shard_id=doc["shard_id"],
                sequence_number=doc["sequence_number"],
                dead_lettered_at=doc["dead_lettered_at"],
                path=path,
            )

    def count(self) -> int:
        return sum(1 for _ in self._root.glob("*/*/*.json")) if self._root.exists() else 0

    def remove(self, record: DeadLetter) -> None:
        record.path.unlink(missing_ok=True)

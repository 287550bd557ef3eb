"""Records a handler refused for their own content (`schema.errors.RecordRejected`): kept per handler.

A dead letter holds the raw bytes, the handler that refused the record and its reason (words only), so
the record can be inspected, erased and re-driven to that handler after a fix. Every other record and
handler carried on, and the shard checkpointed past it. Files are 0600 and folders 0700 (raw customer
data); a record dead-lettered twice for the same handler lands on the same file, the first copy kept.
The store is `pipeline._stored_records.RecordStore`: one folder per handler, then one per shard.
"""

from __future__ import annotations

__all__ = ["DeadLetter", "DeadLetters"]

from dataclasses import dataclass
from pathlib import Path

from pipeline._stored_records import RecordStore, StoredRecord


@dataclass(frozen=True)
class DeadLetter(StoredRecord):
    handler: str
    dead_lettered_at: str


class DeadLetters(RecordStore[DeadLetter]):
    def __init__(self, root: Path) -> None:
        super().__init__(
            root, record_type=DeadLetter, folders=("handler", "shard_id"), stamp_field="dead_lettered_at"
        )

    def put(
        self, *, raw: bytes, reason: str, handler: str, stream_arn: str, shard_id: str, sequence_number: str
    ) -> Path:
        return self._store(
            raw=raw,
            reason=reason,
            handler=handler,
            stream_arn=stream_arn,
            shard_id=shard_id,
            sequence_number=sequence_number,
        )

"""Records the consumer cannot decode: kept with their raw bytes and the reason, never dropped.

The store lives outside the lake (it holds raw customer data) and is readable by its owner only (files
0600, folders 0700). A record quarantined twice (a replay) lands on the same file and the first copy is
kept, so counts stay honest. A record re-driven after a fix is removed once it is handled. The store is
`pipeline._stored_records.RecordStore`: one folder per shard.
"""

from __future__ import annotations

__all__ = ["Quarantine", "QuarantinedRecord", "safe_name", "sequence_file_stem"]

from dataclasses import dataclass
from pathlib import Path

from pipeline._stored_records import RecordStore, StoredRecord, safe_name, sequence_file_stem


@dataclass(frozen=True)
class QuarantinedRecord(StoredRecord):
    quarantined_at: str


class Quarantine(RecordStore[QuarantinedRecord]):
    def __init__(self, root: Path) -> None:
        super().__init__(
            root, record_type=QuarantinedRecord, folders=("shard_id",), stamp_field="quarantined_at"
        )

    def put(self, *, raw: bytes, reason: str, stream_arn: str, shard_id: str, sequence_number: str) -> Path:
        return self._store(
            raw=raw, reason=reason, stream_arn=stream_arn, shard_id=shard_id, sequence_number=sequence_number
        )

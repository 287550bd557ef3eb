"""Records the consumer cannot decode: kept with their raw bytes and the reason, never dropped.

The store lives outside the lake (it holds raw customer data) and is readable by its owner only. A
record quarantined twice (a replay) lands on the same file, so counts stay honest.
"""

from __future__ import annotations

__all__ = ["Quarantine", "QuarantinedRecord", "safe_name", "sequence_file_stem"]

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pipeline._files import private_dir, write_private_file
from pipeline.events import sortable_sequence


@dataclass(frozen=True)
class QuarantinedRecord:
    raw: bytes
    reason: str
    stream_arn: str
    shard_id: str
    sequence_number: str
    quarantined_at: str


class Quarantine:
    def __init__(self, root: Path) -> None:
        self._root = root

    def put(self, *, raw: bytes, reason: str, stream_arn: str, shard_id: str, sequence_number: str) -> Path:
        path = self._path(shard_id, sequence_number)
        document = {
            "reason": reason,
            "stream_arn": stream_arn,
            "shard_id": shard_id,
            "sequence_number": sequence_number,
            "quarantined_at": datetime.now(UTC).isoformat(),
            "raw_base64": base64.b64encode(raw).decode("ascii"),
        }
        write_private_file(path, json.dumps(document, sort_keys=True).encode())
        return path

    def __iter__(self) -> Iterator[QuarantinedRecord]:
        if not self._root.exists():
            return
        for path in sorted(self._root.glob("*/*.json")):
            doc = json.loads(path.read_bytes())
            yield QuarantinedRecord(
                raw=base64.b64decode(doc["raw_base64"]),
                reason=doc["reason"],
                stream_arn=doc["stream_arn"],
                shard_id=doc["shard_id"],
                sequence_number=doc["sequence_number"],
                quarantined_at=doc["quarantined_at"],
            )

    def count(self) -> int:
        return sum(1 for _ in self._root.glob("*/*.json")) if self._root.exists() else 0

    def _path(self, shard_id: str, sequence_number: str) -> Path:
        return private_dir(self._root / safe_name(shard_id)) / f"{sequence_file_stem(sequence_number)}.json"


def safe_name(part: str) -> str:
    """A file-name-safe form of a shard id or handler name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in part)


def sequence_file_stem(sequence_number: str) -> str:
    """Sorts like the sequence number; anything that is not one is encoded, never trusted as a path."""
    if sequence_number.isascii() and sequence_number.isdigit() and len(sequence_number) <= 48:
        return sortable_sequence(sequence_number)
    return "x" + base64.urlsafe_b64encode(sequence_number.encode()).decode()

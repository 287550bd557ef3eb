"""Work a handler could not finish, parked durably so the shard can move on without losing it.

A parked batch holds the raw records (not decoded events) so that it replays through exactly the same
path as the stream: `entitlements replay-parked` decodes them again and hands them to the same
handler. Files are owner-only (they hold customer data) and named by shard and sequence range.
"""

from __future__ import annotations

__all__ = ["ParkedBatch", "ParkedWork", "RawRecord"]

import base64
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pipeline._stored_records import (
    base64_field,
    damaged_files,
    private_folders,
    read_stored,
    safe_name,
    sequence_file_stem,
    text_field,
)
from schema import write_private_file


@dataclass(frozen=True)
class RawRecord:
    """One stream record as the daemon delivered it."""

    data: bytes
    sequence_number: str


@dataclass(frozen=True)
class ParkedBatch:
    path: Path
    handler: str
    stream_arn: str
    shard_id: str
    reason: str
    records: tuple[RawRecord, ...]


_PATTERN = "*/*.json"


def _batch(path: Path, doc: object) -> ParkedBatch:
    records = doc.get("records") if isinstance(doc, dict) else None
    if not isinstance(records, list):
        raise TypeError("records is not a list")
    return ParkedBatch(
        path=path,
        handler=text_field(doc, "handler"),
        stream_arn=text_field(doc, "stream_arn"),
        shard_id=text_field(doc, "shard_id"),
        reason=text_field(doc, "reason"),
        records=tuple(
            RawRecord(base64_field(r, "data_base64"), text_field(r, "sequence_number")) for r in records
        ),
    )


class ParkedWork:
    def __init__(self, root: Path) -> None:
        self._root = root

    def park(
        self, *, handler: str, stream_arn: str, shard_id: str, records: Sequence[RawRecord], reason: str
    ) -> Path:
        if not records:
            raise ValueError("nothing to park")
        first, last = records[0].sequence_number, records[-1].sequence_number
        name = f"{safe_name(shard_id)}-{sequence_file_stem(first)}-{sequence_file_stem(last)}.json"
        path = private_folders(self._root, self._root / safe_name(handler)) / name
        document = {
            "handler": handler,
            "stream_arn": stream_arn,
            "shard_id": shard_id,
            "reason": reason,
            "parked_at": datetime.now(UTC).isoformat(),
            "records": [
                {"sequence_number": r.sequence_number, "data_base64": base64.b64encode(r.data).decode()}
                for r in records
            ],
        }
        write_private_file(path, json.dumps(document).encode())
        return path

    def __iter__(self) -> Iterator[ParkedBatch]:
        """Every readable batch; a damaged file is logged by path and skipped (see `damaged`)."""
        return read_stored(self._root, _PATTERN, _batch)

    def damaged(self) -> list[Path]:
        """The files that cannot be read as a parked batch (left in place, never replayed)."""
        return damaged_files(self._root, _PATTERN, _batch)

    def count(self) -> int:
        return sum(1 for _ in self._root.glob(_PATTERN)) if self._root.exists() else 0

    def remove(self, batch: ParkedBatch) -> None:
        batch.path.unlink(missing_ok=True)

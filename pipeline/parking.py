"""Work a handler could not finish, parked durably so the shard can move on without losing it.

A parked batch holds the raw records (not decoded events) so that it replays through exactly the same
path as the stream: `entitlements consume replay-parked` decodes them again and hands them to the same
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

from pipeline._files import write_private_file
from pipeline._stored_records import private_folders, safe_name, sequence_file_stem


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
        if not self._root.exists():
            return
        for path in sorted(self._root.glob("*/*.json")):
            try:
                doc = json.loads(path.read_bytes())
            except FileNotFoundError:  # replayed or erased while we listed
                continue
            yield ParkedBatch(
                path=path,
                handler=doc["handler"],
                stream_arn=doc["stream_arn"],
                shard_id=doc["shard_id"],
                reason=doc["reason"],
                records=tuple(
                    RawRecord(base64.b64decode(r["data_base64"]), r["sequence_number"])
                    for r in doc["records"]
                ),
            )

    def count(self) -> int:
        return sum(1 for _ in self._root.glob("*/*.json")) if self._root.exists() else 0

    def remove(self, batch: ParkedBatch) -> None:
        batch.path.unlink(missing_ok=True)

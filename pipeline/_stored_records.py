"""What the quarantine and the dead letters share: one owner-only JSON file per stored record.

A record stored twice (a replay, a re-drive that fails again) lands on the same file and the first
copy is kept, so counts stay honest and storing is idempotent. Files are 0600 and folders 0700: they
hold raw customer data.
"""

from __future__ import annotations

__all__ = [
    "private_folders",
    "read_documents",
    "record_path",
    "safe_name",
    "sequence_file_stem",
    "store_document",
]

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline._files import private_dir, write_private_file
from pipeline.events import is_sequence_number, sortable_sequence


def record_path(root: Path, *folders: str, sequence_number: str) -> Path:
    folder = root
    for part in folders:
        folder = folder / safe_name(part)
    return folder / f"{sequence_file_stem(sequence_number)}.json"


def private_folders(root: Path, folder: Path) -> Path:
    """`folder` and every folder from `root` down to it, created owner-only (0700)."""
    private_dir(root)
    current = root
    for part in folder.relative_to(root).parts:
        current = private_dir(current / part)
    return folder


def store_document(root: Path, path: Path, *, raw: bytes, stamp_field: str, **fields: str) -> Path:
    """Write the record once; a second store of the same record keeps the first file."""
    private_folders(root, path.parent)
    if path.exists():
        return path
    document = {
        **fields,
        stamp_field: datetime.now(UTC).isoformat(),
        "raw_base64": base64.b64encode(raw).decode("ascii"),
    }
    write_private_file(path, json.dumps(document, sort_keys=True).encode())
    return path


def read_documents(root: Path, pattern: str) -> Iterator[tuple[Path, dict[str, Any], bytes]]:
    if not root.exists():
        return
    for path in sorted(root.glob(pattern)):
        try:
            document = json.loads(path.read_bytes())
        except FileNotFoundError:  # removed (re-driven, erased) while we listed
            continue
        yield path, document, base64.b64decode(document["raw_base64"])


def safe_name(part: str) -> str:
    """A file-name-safe form of a shard id or handler name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in part)


def sequence_file_stem(sequence_number: str) -> str:
    """Sorts like the sequence number; anything that is not one is encoded, never trusted as a path."""
    if is_sequence_number(sequence_number):
        return sortable_sequence(sequence_number)
    return "x" + base64.urlsafe_b64encode(sequence_number.encode()).decode()

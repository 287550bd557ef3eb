"""What the quarantine and the dead letters share: one owner-only JSON file per stored record, and the
store itself (`RecordStore`), which each of them configures: the record type, the folders, the stamp.

A record stored twice (a replay, a re-drive that fails again) lands on the same file and the first
copy is kept, so counts stay honest and storing is idempotent. Files are 0600 and folders 0700: they
hold raw customer data.

A damaged file (not JSON, a field missing or of the wrong type, bad base64: hand-edited, truncated) is
never a reason to stop: listing logs it by path (shard and sequence only, no content) and skips it,
and `damaged_files` names every one still there, so the commands can report them and exit non-zero.
"""

from __future__ import annotations

__all__ = [
    "RecordStore",
    "StoredRecord",
    "damaged_files",
    "private_folders",
    "read_stored",
    "record_path",
    "safe_name",
    "sequence_file_stem",
    "store_document",
]

import base64
import dataclasses
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from pipeline.events import is_sequence_number, sortable_sequence
from schema import private_dir, write_private_file

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# Bad JSON, UTF-8 or base64 (ValueError), a missing field (KeyError), a wrong shape (TypeError).
_DAMAGE = (ValueError, KeyError, TypeError)


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


def read_stored(root: Path, pattern: str, parse: Callable[[Path, Any], _T]) -> Iterator[_T]:
    """Each file under `root` matching `pattern`, parsed from its JSON document; a damaged one is
    logged by its path and skipped, never stopping the others."""
    for path in _listed(root, pattern):
        try:
            item = parse(path, json.loads(path.read_bytes()))
        except FileNotFoundError:  # removed (re-driven, replayed, erased) while we listed
            continue
        except _DAMAGE as error:
            logger.warning(
                "stored file damaged, skipped", extra={"path": str(path), "error": type(error).__name__}
            )
            continue
        yield item


def damaged_files(root: Path, pattern: str, parse: Callable[[Path, Any], object]) -> list[Path]:
    """The files under `root` matching `pattern` that `parse` cannot read, sorted."""
    damaged = []
    for path in _listed(root, pattern):
        try:
            parse(path, json.loads(path.read_bytes()))
        except FileNotFoundError:
            continue
        except _DAMAGE:
            damaged.append(path)
    return damaged


def text_field(document: Any, name: str) -> str:
    """`document[name]`, which must be text; anything else is a damaged file (KeyError, TypeError)."""
    if not isinstance(document, dict):
        raise TypeError("not a JSON object")
    value = document[name]
    if not isinstance(value, str):
        raise TypeError(f"{name} is not text")
    return value


def base64_field(document: Any, name: str) -> bytes:
    """`document[name]` decoded from strict base64 (binascii.Error, a ValueError, when it is not)."""
    return base64.b64decode(text_field(document, name), validate=True)


def _listed(root: Path, pattern: str) -> list[Path]:
    return sorted(path for path in root.glob(pattern) if path.is_file()) if root.exists() else []


def safe_name(part: str) -> str:
    """A file-name-safe form of a shard id or handler name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in part)


def sequence_file_stem(sequence_number: str) -> str:
    """Sorts like the sequence number; anything that is not one is encoded, never trusted as a path."""
    if is_sequence_number(sequence_number):
        return sortable_sequence(sequence_number)
    return "x" + base64.urlsafe_b64encode(sequence_number.encode()).decode()


@dataclass(frozen=True)
class StoredRecord:
    """What every stored record holds; a store's own record type adds its text fields (its stamp)."""

    raw: bytes
    reason: str
    stream_arn: str
    shard_id: str
    sequence_number: str
    path: Path


_R = TypeVar("_R", bound=StoredRecord)


class RecordStore(Generic[_R]):
    """Records of type `record_type`, each in `<root>/<one folder per field of folders>/<sequence>.json`;
    the time it was stored in its `stamp_field`. Storing twice keeps the first file (idempotent)."""

    def __init__(
        self, root: Path, *, record_type: type[_R], folders: tuple[str, ...], stamp_field: str
    ) -> None:
        self._root = root
        self._type = record_type
        self._folders = folders
        self._stamp_field = stamp_field
        self._pattern = "/".join(["*"] * len(folders) + ["*.json"])

    @property
    def root(self) -> Path:
        return self._root

    def _store(self, *, raw: bytes, **fields: str) -> Path:
        path = record_path(
            self._root, *(fields[name] for name in self._folders), sequence_number=fields["sequence_number"]
        )
        return store_document(self._root, path, raw=raw, stamp_field=self._stamp_field, **fields)

    def _parse(self, path: Path, document: Any) -> _R:
        values: dict[str, Any] = {
            field.name: text_field(document, field.name)
            for field in dataclasses.fields(self._type)
            if field.name not in ("raw", "path")
        }
        return self._type(raw=base64_field(document, "raw_base64"), path=path, **values)

    def __iter__(self) -> Iterator[_R]:
        """Every readable record; a damaged file is logged by path and skipped (see `damaged`)."""
        return read_stored(self._root, self._pattern, self._parse)

    def damaged(self) -> list[Path]:
        """The files that cannot be read as a record of this store (left in place, never listed)."""
        return damaged_files(self._root, self._pattern, self._parse)

    def count(self) -> int:
        return sum(1 for _ in self._root.glob(self._pattern)) if self._root.exists() else 0

    def remove(self, record: _R) -> None:
        record.path.unlink(missing_ok=True)

"""Owner-only files written whole: the one atomic write of the project.

Every file the project keeps on local disk can hold user ids (lake files, quarantined and parked
records, the journal, the erasure ledger and mask, shard stats), so each is created 0600 in a folder
0700, and never seen half written: a hidden temporary file in the target folder, fsynced, renamed over
the final name (atomic on POSIX), then the folder fsynced so the rename survives a crash.

`schema` imports none of the other packages, so this sits here and every layer above uses it.
"""

from __future__ import annotations

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "append_private_file",
    "private_dir",
    "write_private",
    "write_private_file",
]

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
_T = TypeVar("_T")


def private_dir(path: Path | str) -> Path:
    """Create `path` (and each missing parent) readable by its owner only; tighten it if it exists.

    Parents that already exist are left as they are: they may be shared (`/tmp`, a home)."""
    folder = Path(path)
    missing: list[Path] = []
    probe = folder
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for created in reversed(missing):
        created.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        created.chmod(PRIVATE_DIR_MODE)  # mkdir's mode is masked by the umask
    folder.chmod(PRIVATE_DIR_MODE)
    return folder


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_private(path: Path | str, write: Callable[[BinaryIO], _T]) -> _T:
    """Write the whole file at `path` through `write(handle)`, atomically, owner-only; returns what
    `write` returned. On any failure the temporary file is removed and the old file (if any) stays."""
    target = Path(path)
    folder = private_dir(target.parent)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        with os.fdopen(fd, "wb") as out:
            result = write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _fsync_dir(folder)
    return result


def write_private_file(path: Path | str, data: bytes) -> None:
    """Write `data` as the whole file at `path`, atomically, owner-only."""
    write_private(path, lambda out: out.write(data))


def append_private_file(path: Path | str, data: bytes) -> None:
    """Append `data` to the owner-only file at `path` (created 0600, tightened if older) and fsync it."""
    target = Path(path)
    private_dir(target.parent)
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)

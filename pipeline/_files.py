"""Private, owner-only files written whole (temporary file, fsync, atomic rename)."""

from __future__ import annotations

__all__ = ["private_dir", "write_private_file"]

import os
import tempfile
from pathlib import Path


def private_dir(path: Path) -> Path:
    """Create a directory readable by its owner only (it may hold customer data)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.chmod(0o700)
    return path


def write_private_file(path: Path, data: bytes) -> None:
    private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

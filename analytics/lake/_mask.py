"""The erasure mask: the users an erasure is removing from the lake, kept in the lake itself.

Every view hides them (`analytics.lake.views.create_views` reads this file), from the moment an erasure masks
them until both of its passes have purged their rows. Kept beside the data it hides (`_erasure/mask.json`
under the lake root: owner-only locally, one whole PUT on S3), so every reader of the lake applies it,
wherever it runs. Not a data file: listings of the datasets never see it.

Locally a write goes through a hidden temporary file renamed over the mask (`schema._files`); a process
killed between the two leaves that file, holding the ids being erased. Each write deletes such files
last written more than `LEFTOVER_AGE` ago (a write takes milliseconds, so an older one is a crash's),
so an erasure's unmask leaves none holding its user.
"""

from __future__ import annotations

__all__ = ["LEFTOVER_AGE", "MASK_PATH", "read_mask", "write_mask"]

import json
import os
import time
from collections.abc import Iterable

import pyarrow.fs as pafs

from analytics.lake._files import read_bytes, write_bytes_atomic
from analytics.lake._filesystem import Lake

MASK_PATH = "_erasure/mask.json"
LEFTOVER_AGE = 60.0  # seconds


def read_mask(lake: Lake) -> frozenset[str]:
    """The masked user ids; none when no erasure has masked any. A mask that cannot be read raises:
    a reader never goes on as though nobody were masked."""
    try:
        data = json.loads(read_bytes(lake, MASK_PATH))
    except OSError:  # FileNotFoundError locally; some S3 builds say only "OSError: Path does not exist"
        if lake.fs.get_file_info(lake.path(MASK_PATH)).type == pafs.FileType.NotFound:
            return frozenset()
        raise
    return frozenset(str(user_id) for user_id in data.get("user_ids", []))


def write_mask(lake: Lake, user_ids: Iterable[str]) -> None:
    """Replace the mask, whole and atomically."""
    write_bytes_atomic(lake, MASK_PATH, json.dumps({"user_ids": sorted(set(user_ids))}).encode())
    if lake.is_local:  # on S3 a write is one PUT: nothing is left half way
        _remove_leftovers(os.path.dirname(lake.path(MASK_PATH)))


def _remove_leftovers(folder: str) -> None:
    prefix = f".{os.path.basename(MASK_PATH)}."
    cutoff = time.time() - LEFTOVER_AGE
    with os.scandir(folder) as entries:
        for entry in entries:
            if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
                continue
            try:
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
            except FileNotFoundError:
                continue  # another writer removed it first

"""The lake side of an erasure: `processors.erasure.LakeEraser` over analytics' own API (composition;
processors never import analytics).

- `purge` is `analytics.lake.purge_users`: one call per received batch of erasures, rewriting each file
  that holds a row of any of them once, whole and atomically, and no other file. Calls are serialised
  in the process (two purges rewriting one file at once would lose one's deletes): run one erasure
  worker per lake.
- `mask` keeps the user ids being erased in a small owner-only file (`mask_file`, under the consumer's
  state directory) until both passes have purged them; `connect` opens the lake's DuckDB views with that
  mask (`analytics.connect(lake, mask=...)`), so the views exclude those users at once, before the
  files are rewritten. `unmask` forgets them after the second pass: the mask is the one place that
  holds their ids, so it must not keep them; the landing filter keeps their events out from then on.
- `holds` is not an analytics call (analytics offers none): it scans the `user_id` (and `pk`) columns of
  every data file in the purged datasets (`analytics.lake.purge.PURGED_DATASETS`) with pyarrow.dataset,
  and answers None when a file cannot be read.
"""

from __future__ import annotations

__all__ = ["MASK_FILE_NAME", "AnalyticsLakeEraser", "users_being_erased"]

import json
import os
import tempfile
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from analytics import Lake, connect, purge_users
from analytics.lake.purge import PURGED_DATASETS
from schema.table import USER_PK_PREFIX

MASK_FILE_NAME = "erasure-lake-mask.json"


def users_being_erased(lake: Lake, state_dir: Path) -> frozenset[str]:
    """The users an erasure has masked in `lake` and not yet purged: every reader of the lake hides them
    (`entitlements sql`, `audit`, `mine`), whatever the files still hold."""
    return AnalyticsLakeEraser(lake, state_dir / MASK_FILE_NAME).masked_users()


class AnalyticsLakeEraser:
    """A `LakeEraser` for `lake`, keeping its mask in `mask_file`. Thread-safe."""

    def __init__(self, lake: Lake, mask_file: Path) -> None:
        self._lake = lake
        self._mask_file = mask_file
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AnalyticsLakeEraser(lake={self._lake.uri!r})"

    @property
    def lake(self) -> Lake:
        return self._lake

    # -- the mask -----------------------------------------------------------------------------------

    def masked_users(self) -> frozenset[str]:
        try:
            data = json.loads(self._mask_file.read_bytes())
        except FileNotFoundError:
            return frozenset()
        return frozenset(str(user_id) for user_id in data.get("user_ids", []))

    def mask(self, user_ids: Collection[str]) -> None:
        with self._lock:
            current = self.masked_users()
            wanted = current | frozenset(user_ids)
            if wanted != current:
                self._write_mask(wanted)

    def unmask(self, user_ids: Collection[str]) -> None:
        with self._lock:
            current = self.masked_users()
            wanted = current - frozenset(user_ids)
            if wanted != current:
                self._write_mask(wanted)

    def connect(self, *, from_snapshot: bool = False) -> duckdb.DuckDBPyConnection:
        """The lake's views on a new DuckDB connection, hiding every user being erased."""
        return connect(self._lake, mask=self.masked_users(), from_snapshot=from_snapshot)

    def _write_mask(self, user_ids: frozenset[str]) -> None:
        directory = self._mask_file.parent
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = json.dumps({"user_ids": sorted(user_ids)}).encode()
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self._mask_file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # -- purge and holdings -------------------------------------------------------------------------

    def purge(self, user_ids: Collection[str]) -> int:
        with self._lock:
            return purge_users(self._lake, user_ids).total_rows

    def holds(self, user_id: str) -> bool | None:
        try:
            return any(self._dataset_holds(name, user_id) for name in PURGED_DATASETS)
        except (OSError, pa.ArrowException):
            return None

    def _data_files(self, directory: str) -> list[str]:
        selector = pafs.FileSelector(self._lake.path(directory), recursive=True, allow_not_found=True)
        return sorted(
            info.path
            for info in self._lake.fs.get_file_info(selector)
            if info.type == pafs.FileType.File
            and info.base_name.endswith(".parquet")
            and not info.base_name.startswith(("_", "."))
        )

    def _dataset_holds(self, directory: str, user_id: str) -> bool:
        files = self._data_files(directory)
        if not files:
            return False
        dataset = ds.dataset(files, filesystem=self._lake.fs, format="parquet")
        names = set(dataset.schema.names)
        condition: Any = None
        if "user_id" in names:
            condition = ds.field("user_id") == user_id
        if "pk" in names:
            by_pk = ds.field("pk") == f"{USER_PK_PREFIX}{user_id}"
            condition = by_pk if condition is None else (condition | by_pk)
        if condition is None:
            return False
        return bool(dataset.count_rows(filter=condition))

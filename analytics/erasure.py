"""The lake side of an erasure: `processors.erasure.LakeEraser` over the lake's own API (processors never
import analytics; `entitlements.compose` hands the worker this adapter).

- `mask` adds the user ids being erased to the lake's mask (`analytics/lake/_mask.py`: a small file in
  the lake itself, owner-only locally), and every view hides them from then on, before their files are
  rewritten: `analytics.connect` and every audit and report read the mask themselves, so no reader can
  forget it. `unmask` forgets them after the second pass: the mask is the one place that holds their
  ids, so it must not keep them; the landing filter keeps their events out from then on.
- `purge` is `analytics.lake.purge_users`: one call per received batch of erasures: one DELETE commit
  per table, then the vacuum and log clean-up that leave no byte naming them. Calls are serialised in
  the process; across processes and hosts, Delta's conflict checks order a purge and any rewrite.
- `holds` scans the user-id columns (`USER_ID_COLUMNS`) and `pk` of every current data file of the
  purged tables (`analytics.lake.purge.PURGED_DATASETS`, as their Delta logs name them, the stored audit
  failures included) with pyarrow.dataset, and answers None when a file cannot be read.
"""

from __future__ import annotations

__all__ = ["AnalyticsLakeEraser"]

import threading
from collections.abc import Collection

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake.exceptions import DeltaError

from analytics.lake import Lake, purge_users
from analytics.lake._delta import active_files, open_table, table_schema_names
from analytics.lake._mask import read_mask, write_mask
from analytics.lake.purge import PURGED_DATASETS, USER_ID_COLUMNS
from analytics.views import connect
from schema.table import USER_PK_PREFIX


class AnalyticsLakeEraser:
    """A `LakeEraser` for `lake`. Thread-safe."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AnalyticsLakeEraser(lake={self._lake.uri!r})"

    @property
    def lake(self) -> Lake:
        return self._lake

    # -- the mask -----------------------------------------------------------------------------------

    def masked_users(self) -> frozenset[str]:
        return read_mask(self._lake)

    def mask(self, user_ids: Collection[str]) -> None:
        with self._lock:
            current = read_mask(self._lake)
            wanted = current | frozenset(user_ids)
            if wanted != current:
                write_mask(self._lake, wanted)

    def unmask(self, user_ids: Collection[str]) -> None:
        with self._lock:
            current = read_mask(self._lake)
            wanted = current - frozenset(user_ids)
            if wanted != current:
                write_mask(self._lake, wanted)

    def connect(self, *, from_snapshot: bool = False) -> duckdb.DuckDBPyConnection:
        """The lake's views on a new DuckDB connection (hiding every user being erased, as every
        connection does)."""
        return connect(self._lake, from_snapshot=from_snapshot)

    # -- purge and holdings -------------------------------------------------------------------------

    def purge(self, user_ids: Collection[str]) -> int:
        with self._lock:
            return purge_users(self._lake, user_ids).total_rows

    def holds(self, user_id: str) -> bool | None:
        try:
            return any(self._dataset_holds(name, user_id) for name in PURGED_DATASETS)
        except (OSError, pa.ArrowException, DeltaError):
            return None

    def _dataset_holds(self, directory: str, user_id: str) -> bool:
        table = open_table(self._lake, directory)
        files = [self._lake.path(f"{directory}/{path}") for path, _ in active_files(table)]
        if table is None or not files:
            return False
        wanted = {**dict.fromkeys(USER_ID_COLUMNS, user_id), "pk": f"{USER_PK_PREFIX}{user_id}"}
        probe = [c for c in wanted if c in table_schema_names(table)]
        # Every file is read (its probed columns): a file that cannot be read answers None.
        for path in files:
            with self._lake.fs.open_input_file(path) as handle:
                columns = pq.read_table(handle, columns=probe)
            for name in probe:
                values = columns[name].cast(pa.string())
                if pc.any(pc.equal(values, wanted[name])).as_py():
                    return True
        return False

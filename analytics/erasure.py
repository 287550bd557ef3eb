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
- `holds` reads every file under each purged table's folder (`analytics.lake.purge.PURGED_DATASETS`,
  the stored audit failures included): not only the data files the log names, but files a failed commit
  left, files removed and not yet vacuumed, the log's JSON entries, checkpoints and temporary commit
  files (`analytics/lake/_traces.py` says how each kind is matched: whole values, never substrings).
  It answers None when a file cannot be read, never "holds none".
- `traces` is the same scan, per table: how many files were read and how many hold the user (counts
  and uuid-named paths only), for a receipt's verifier.
"""

from __future__ import annotations

__all__ = ["AnalyticsLakeEraser"]

import threading
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime

import duckdb
import pyarrow as pa

from analytics.lake import Lake, purge_users
from analytics.lake._mask import read_mask, write_mask
from analytics.lake._traces import TableTraces, scan_table
from analytics.lake.purge import PURGED_DATASETS
from analytics.views import connect


class AnalyticsLakeEraser:
    """A `LakeEraser` for `lake`. Thread-safe. `clock` dates the purge's bound on files of failed
    commits (`analytics.lake.purge.ORPHAN_AGE`; injectable for tests)."""

    def __init__(self, lake: Lake, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._lake = lake
        self._clock = clock
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
            return purge_users(self._lake, user_ids, clock=self._clock).total_rows

    def holds(self, user_id: str) -> bool | None:
        """Whether any file under any purged table holds the user; None when a file cannot be read."""
        try:
            return any(scan_table(self._lake, name, user_id).traces for name in PURGED_DATASETS)
        except (OSError, pa.ArrowException):
            return None

    def traces(self, user_id: str) -> Mapping[str, TableTraces | None]:
        """Per purged table, the scan `holds` makes (files read, files holding the user), or None for a
        table a file of which cannot be read. A table never created reads as 0 files."""
        found: dict[str, TableTraces | None] = {}
        for name in PURGED_DATASETS:
            try:
                found[name] = scan_table(self._lake, name, user_id)
            except (OSError, pa.ArrowException):
                found[name] = None
        return found

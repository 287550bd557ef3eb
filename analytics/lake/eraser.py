"""The lake side of an erasure: `processors.erasure._lake.LakeEraser` over the lake's own API
(processors never import analytics; `entitlements.compose` hands the worker this adapter).

- `mask` adds the user ids being erased to the lake's mask (`analytics/lake/_mask.py`: a small file in
  the lake itself, owner-only locally), and every view hides them from then on, before their files are
  rewritten: `analytics.connect` and every audit and report read the mask themselves, so no reader can
  forget it. `unmask` forgets them after the second pass: the mask is the one place that holds their
  ids, so it must not keep them; the landing filter keeps their events out from then on.
- `purge` is `analytics.lake.purge.purge_users`: one call per received batch of erasures: one DELETE commit
  per table, then the vacuum and log clean-up that leave no byte naming them. Calls are serialised in
  the process; across processes and hosts, Delta's conflict checks order a purge and any rewrite.
- `holds` reads every file under each purged table's folder (`analytics.lake.purge.PURGED_DATASETS`,
  the stored audit failures included): not only the data files the log names, but files a failed commit
  left, files removed and not yet vacuumed, the log's JSON entries, checkpoints and temporary commit
  files (`analytics/lake/_traces.py` says how each kind is matched: whole values, never substrings).
  It answers None when a file cannot be read, never "holds none".
- `traces_for` is the same scan, per table, once for a whole batch of users: how many files were read
  and, per user, the files holding them (counts and uuid-named paths only), for the receipts' verifier.
  Given `until`, it stops with `TimeoutError` once that instant passes, never answering "none" for a
  table it did not finish. Like purges, scans are shared in the process: a call made while a scan
  runs waits for the next one, which begins after every call waiting meanwhile and reads for all
  their users at once (a scan's cost is per file, not per user: concurrent batches' verifiers no
  longer each read the whole lake). Only a scan that began after the call is its answer; the shared
  scan runs until the latest of its callers' `until`, and a caller whose own `until` passes first
  stops waiting with `TimeoutError`.
- `purge` answers per user what it removed of them, per table (`PurgeCounts.rows_by_user`).
"""

from __future__ import annotations

__all__ = ["AnalyticsLakeEraser"]

import threading
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime

import duckdb
import pyarrow as pa

from analytics.lake import Lake
from analytics.lake._mask import read_mask, write_mask
from analytics.lake._shared_runs import SharedRuns
from analytics.lake._traces import BatchTraces, scan_table_for
from analytics.lake.purge import PURGED_DATASETS, PurgeCounts, purge_users
from analytics.lake.views import connect

_Scanned = Mapping[str, BatchTraces | None]


class AnalyticsLakeEraser:
    """A `LakeEraser` for `lake`. Thread-safe. `clock` dates the purge's bound on files of failed
    commits (`analytics.lake.purge.ORPHAN_AGE`; injectable for tests)."""

    def __init__(self, lake: Lake, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._lake = lake
        self._clock = clock
        self._lock = threading.Lock()
        # Purges are serialised in the process and verifier scans shared: batches that arrive while
        # one runs share the next (analytics/lake/_shared_runs.py).
        self._purges: SharedRuns[PurgeCounts] = SharedRuns(
            lambda ids, _until: purge_users(self._lake, ids, clock=self._clock)
        )
        self._scans: SharedRuns[_Scanned] = SharedRuns(self._scan)

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

    def purge(self, user_ids: Collection[str]) -> Mapping[str, Mapping[str, int]]:
        """Per user, the rows of theirs deleted from each purged table (0 where they had none).

        A call made while another purge runs waits for it, then shares one purge with every call that
        waited meanwhile (the cost of a purge is per table, not per user: a received batch arriving
        during one is folded into the next instead of queueing a purge of its own)."""
        counts = self._purges.shared(frozenset(user_ids))
        return {
            user_id: {name: counts.rows_by_user.get(user_id, {}).get(name, 0) for name in PURGED_DATASETS}
            for user_id in sorted(set(user_ids))
        }

    def _purges_waiting(self) -> int:
        """How many purge calls wait for the running one (for tests)."""
        return self._purges.waiting()

    def holds(self, user_id: str) -> bool | None:
        """Whether any file under any purged table holds the user; None when a file cannot be read."""
        try:
            return any(
                scan_table_for(self._lake, name, (user_id,)).traces_of(user_id) for name in PURGED_DATASETS
            )
        except (OSError, pa.ArrowException):
            return None

    def traces_for(
        self, user_ids: Collection[str], *, until: float | None = None
    ) -> Mapping[str, BatchTraces | None]:
        """Per purged table, the scan `holds` makes, once for every user of the batch (files read, and
        per user the files holding them), or None for a table a file of which cannot be read. A table
        never created reads as 0 files. `TimeoutError` once `until` (a `time.monotonic()` instant)
        passes. Shared with the calls made meanwhile (module docstring)."""
        ids = frozenset(user_ids)
        found = self._scans.shared(ids, until)
        return {
            name: None
            if traces is None
            else BatchTraces(
                traces.table,
                traces.files_scanned,
                {user: paths for user, paths in traces.holding.items() if user in ids},
            )
            for name, traces in found.items()
        }

    def _scan(self, user_ids: Collection[str], until: float | None) -> Mapping[str, BatchTraces | None]:
        found: dict[str, BatchTraces | None] = {}
        for name in PURGED_DATASETS:
            try:
                found[name] = scan_table_for(self._lake, name, user_ids, until=until)
            except TimeoutError:
                raise  # an OSError too, but no answer about the table: the batch is left unverified
            except (OSError, pa.ArrowException):
                found[name] = None
        return found

    def _scans_waiting(self) -> int:
        """How many scan calls wait for the running one (for tests)."""
        return self._scans.waiting()

"""Committing a flush: the pending parts of each table, one Delta commit per table, planned against the
version it is written on (exactly once: `analytics.lake._high_water`).

Two places commit: the landing handler itself (`TableCommits`, in the process that buffered the rows)
and the worker writer (`analytics.lake.worker_writer`), which takes the flushes of a worker's children
and commits the ones that arrive together through the same `TableCommits`. Either way the answer is a
`CommitReport` (`analytics.lake._commit_report`, light: a KCL child's landing handler and its
worker-writer client import it without loading the planner, delta-rs and pyarrow.dataset): which
tables committed, and the first that failed (the later ones are not tried, so a
retry writes only what is still buffered).
"""

from __future__ import annotations

__all__ = ["TableCommits"]

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from analytics.lake._commit_report import CommitReport, Pending
from analytics.lake._delta import Prepared, append, open_table
from analytics.lake._files import TABLES, ensure_layout
from analytics.lake._filesystem import Lake
from analytics.lake._high_water import (
    MarkCache,
    Plan,
    plan_changes,
    plan_outcomes,
)
from analytics.lake._rows import PendingFile
from analytics.lake._schema import CHANGES, OUTCOMES, PARTITION_COLUMN, AllowList


class TableCommits:
    """Commits in this process: the tables opened once and kept, opened afresh after a failure (an
    erasure may have cleaned the log the open version was read from)."""

    def __init__(self, lake: Lake, allow: AllowList) -> None:
        self._lake = lake
        self._allow = allow
        self._tables: dict[str, DeltaTable] | None = None
        self._marks = {dataset: MarkCache(lake, dataset) for dataset in (CHANGES, OUTCOMES)}

    def commit(self, pending: Pending) -> CommitReport:
        committed: list[str] = []
        commits = rows = dropped = 0
        for dataset, parts in pending:
            try:
                if self._tables is None:
                    self._tables = ensure_layout(self._lake, self._allow)
                written, skipped = self._write(dataset, parts)
            except (OSError, pa.ArrowException, DeltaError) as error:
                self._tables = None
                # Read afresh after a failure, as the tables are (the cache would also find a
                # commit that landed all the same in the log; this is the simpler certainty).
                self._marks[dataset].clear()
                return CommitReport(tuple(committed), dataset, type(error).__name__, commits, rows, dropped)
            committed.append(dataset)
            commits += 1 if written else 0
            rows += written
            dropped += skipped
        return CommitReport(tuple(committed), None, None, commits, rows, dropped)

    def _write(self, dataset: str, pending: list[PendingFile]) -> tuple[int, int]:
        """One commit of every pending part of `dataset`, each row with its partition day, less the
        rows already in the table (no commit when every row was there). Returns (rows written, rows
        dropped as already there)."""
        assert self._tables is not None
        parts = [
            item.table.append_column(
                pa.field(PARTITION_COLUMN, pa.date32()),
                pa.repeat(pa.scalar(item.day, pa.date32()), item.table.num_rows),
            )
            for item in pending
        ]
        table = self._tables[dataset]
        plan_rows = plan_changes if dataset == CHANGES else plan_outcomes
        marks = self._marks[dataset]
        planned: list[Plan] = []

        def prepare(current: DeltaTable) -> Prepared:
            # Planned again on every attempt: against the version that attempt writes on.
            plan = plan_rows(current, data, read_mark=marks.high_water)
            planned.append(plan)
            return plan.data, plan.transactions

        data = pa.concat_tables(parts)
        version = append(
            self._lake,
            table,
            dataset,
            data,
            partition_by=TABLES[dataset].partition_by,
            prepare=prepare,
        )
        if table.version() != version:
            # The commit went through a reopened table (an erasure cleaned this one's log away): the
            # next flush starts from the new one, not from a snapshot that is gone.
            fresh = open_table(self._lake, dataset)
            if fresh is not None:
                self._tables[dataset] = fresh
        return int(planned[-1].data.num_rows), planned[-1].dropped

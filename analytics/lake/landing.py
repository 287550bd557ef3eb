"""Landing: the record processor's handler that writes every typed event to the lake's change log, and
the processors' outcome sink that writes outcome events to their own dataset, through one flush.

The processor checkpoints a shard only after `flush()` returns, and `flush()` always writes everything
buffered, so a checkpoint never runs ahead of the files. Between checkpoints the handler also writes
when `flush_rows` rows are buffered or the oldest buffered row is `flush_seconds` old (checked as rows
arrive), so memory stays bounded however long a run is.

Each flush is one Delta commit per table it touches (`changes`, `outcomes`): every buffered row of the
table, all partitions, in one atomic append; a failed commit leaves the table as it was and the buffer
as it is, and a table whose commit succeeded is not written again by the retry. Many handlers (KCL
workers on many hosts) append to one table at once: each commit gets its own version. An erasure's
purge cleaning the log under a handler's open table does not fail a flush: the append reopens the
table at its newest version and commits there (`analytics.lake._delta.append`).

Exactly once in the tables, for any reader: a restart, a lease moving to another worker or a crash
between a commit and its checkpoint replays events, with batch boundaries that may move, so a batch
is never identified by a number. Each commit instead carries the high-water mark (HWM) of every shard
it lands rows of: the highest sequence key of the shard in the table, as Delta `txn` actions of the
same commit (a 48-digit key spread over three application ids of 16 digits each, since a `txn`
version is an int64; `analytics.lake._high_water`). The table's snapshot keeps them through
checkpoints, log clean-up, compaction and purges. Each commit is planned against the version it is
written on: rows above their shard's HWM are written; rows at or below it (a replay, or a shard's
first commit) are looked up in the table and dropped when there (`LandingStats.replays_dropped`),
written when not (a parked window or a redriven record lies below the HWM without being in the
table). Commits carrying one shard's application ids conflict in delta-rs's conflict check, so a
zombie worker whose lease moved cannot land what its successor landed: its commit fails and is
planned again on the newest version. Outcomes do the same with their source shard's HWM in the
`outcomes` table (identity: outcome_id, or (source event, final) for a final outcome; the first
final outcome committed for an expiry stands), and outcomes with no source event are looked up by
outcome_id. The checkpoint still only follows a flush, so it never passes what is committed.

Where the commit runs: here (`analytics.lake._commits.TableCommits`), or, for a KCL child, in its
worker's writer process, which lands the flushes of the worker's children that arrive together in one
commit per table and answers each flush once that commit returned (`analytics.lake.worker_writer`).
"""

from __future__ import annotations

__all__ = ["LakeHandler", "LandingStats"]

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from analytics.lake._commit_report import Commits
from analytics.lake._filesystem import Lake
from analytics.lake._rows import ChangeBuffer, OutcomeBuffer, PendingFile
from analytics.lake._schema import CHANGES, OUTCOMES, AllowList, default_allow_list
from config import LakeSettings
from pipeline import StreamEvent
from schema.errors import RecordContext, RetryableError
from schema.outcomes import OutcomeEvent

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class LandingStats:
    """Counts since the handler was made (no personal data: safe to log)."""

    events: int = 0
    outcomes: int = 0
    duplicates_skipped: int = 0  # repeated within the buffer
    replays_dropped: int = 0  # already in the table when a commit was planned
    files_written: int = 0  # commits (one per table a flush touches)
    rows_written: int = 0
    flushes: int = 0


class LakeHandler:
    """A `pipeline.handlers.Handler` and a `schema.outcomes.OutcomeSink` landing into `lake`.

    `settings.flush_rows` and `settings.flush_seconds` bound what is buffered between the processor's
    flushes; `allow_list` defaults to `schema/lake_allow_list.json`; `monotonic` is the clock for the
    interval (injectable for tests); `commits` where a flush is committed (default: in this process; a
    KCL child's goes to its worker's writer, `analytics.lake.worker_writer`). Thread-safe: outcomes may
    arrive from other threads.
    """

    def __init__(
        self,
        lake: Lake,
        settings: LakeSettings | None = None,
        *,
        allow_list: AllowList | None = None,
        name: str = "lake",
        monotonic: Callable[[], float] = time.monotonic,
        commits: Commits | None = None,
    ) -> None:
        self._lake = lake
        self._settings = settings or LakeSettings()
        # Read once: the bounds are checked for every event (a settings object is frozen).
        self._flush_rows = self._settings.flush_rows
        self._flush_seconds = self._settings.flush_seconds
        self._allow = allow_list or default_allow_list()
        self._name = name
        self._monotonic = monotonic
        self._changes = ChangeBuffer(self._allow)
        self._outcomes = OutcomeBuffer()
        self._oldest: float | None = None
        self._lock = threading.RLock()
        if commits is None:
            # Here, not at the top: a KCL child commits through its worker's writer and never loads
            # the committer's planner (analytics.lake._commit_report says why that matters).
            from analytics.lake._commits import TableCommits  # noqa: PLC0415

            commits = TableCommits(lake, self._allow)
        self._commits = commits
        self.stats = LandingStats()

    @property
    def name(self) -> str:
        return self._name

    @property
    def buffered(self) -> int:
        return len(self._changes) + len(self._outcomes)

    def add(self, event: StreamEvent) -> None:
        with self._lock:
            if not self._changes.append(event):
                self.stats.duplicates_skipped += 1
                return
            self.stats.events += 1
            self._after_append()

    def add_outcome(self, outcome: OutcomeEvent) -> None:
        with self._lock:
            if self._outcomes.append(outcome):
                self.stats.outcomes += 1
                self._after_append()
            else:
                self.stats.duplicates_skipped += 1

    def flush(self) -> None:
        """Write everything buffered, whole files only; return when it is durable."""
        with self._lock:
            self._write_all()

    def discard_pending(self) -> None:
        """Forget the change events buffered since the last write: the consumer has parked their raw
        records and will replay them. Buffered outcomes are kept (they did not come from those records)
        and are written by the next flush."""
        with self._lock:
            self._changes.clear()
            if not len(self._outcomes):
                self._oldest = None

    def _after_append(self) -> None:
        now = self._monotonic()
        if self._oldest is None:
            self._oldest = now
        # The two lengths directly, not through the `buffered` property: this runs for every event.
        if (
            len(self._changes) + len(self._outcomes) >= self._flush_rows
            or now - self._oldest >= self._flush_seconds
        ):
            self._write_all()

    def _write_all(self) -> None:
        if not self.buffered:
            return
        buffers: dict[str, ChangeBuffer | OutcomeBuffer] = {CHANGES: self._changes, OUTCOMES: self._outcomes}
        pending = [(dataset, parts) for dataset, buffer in buffers.items() if (parts := list(buffer.files()))]
        report = self._commits.commit(pending)
        # A table committed is not written again by the retry; the failed one keeps its buffer.
        for dataset in report.committed:
            buffers[dataset].clear()
        self.stats.files_written += report.commits
        self.stats.rows_written += report.rows_written
        self.stats.replays_dropped += report.replays_dropped
        if report.failed is not None:
            raise RetryableError(
                f"lake commit failed ({report.error})", context=self._context(dict(pending)[report.failed])
            )
        self.stats.flushes += 1
        logger.debug("lake flush", extra={"commits": report.commits, "rows": report.rows_written})
        self._oldest = None
        # Hand Arrow's freed buffers back to the system: a long run keeps the footprint of a short one.
        pa.default_memory_pool().release_unused()

    @staticmethod
    def _context(pending: list[PendingFile]) -> RecordContext:
        for item in pending:
            if "shard_id" in item.table.column_names and item.table.num_rows:
                return RecordContext(
                    shard_id=item.table["shard_id"][0].as_py(),
                    sequence_number=item.table["sequence_number"][0].as_py(),
                )
        return RecordContext()

"""Table maintenance at a set cadence: checkpoints, compaction, vacuum and log clean-up, run by ONE
runner per lake however many consumer children append to it.

Why one runner, and why a lease rather than Delta's conflict check: two delta-rs OPTIMIZE runs planned on
the same version both commit (deltalake 1.6.6 lets a commit whose removes are `dataChange = false`
through a concurrent remove of the same files), and the table then holds every merged row twice. So
the runner that compacts is elected, and a runner never compacts without holding the lease.

The lease is the one row of a small Delta table of the lake's own (`_maintenance`): taking or renewing
it is an overwrite committed with no commit retry on the version the runner read, so of any runners
racing for one version exactly one commit lands (a local create-if-absent, an S3 conditional PUT: the
same arbiter as `ensure_table`'s version 0). A holder renews at half-life and before each compaction;
another runner takes the lease only once it has expired. The row also carries, per table, the version
of its last compaction and the rounds run, so a new leader picks the cadence up where the last one
left it.

The cadence (`LakeSettings`, costs in docs/architecture.md, "Commits at scale"):
- a checkpoint once `checkpoint_interval` commits (the tables' `delta.checkpointInterval`) have landed
  since the last one, written by the leader from the table opened afresh (appends write none:
  `analytics.lake._delta.APPEND_HOOKS` says why);
- a compaction of a table once `compact_every_commits` commits have landed since its last one, tiered
  (`compaction.tier_target`), then a vacuum of the files removed more than
  `delta.deletedFileRetentionDuration` ago (in `compaction.compact`) and a log clean-up;
- the leader sets those three table properties when a table's differ from the settings (one metadata
  commit per table, once: concurrent appends redo their commit on the new version).
"""

from __future__ import annotations

__all__ = [
    "MAINTENANCE_TABLE",
    "STATS_COLUMNS",
    "Lease",
    "MaintenancePolicy",
    "MaintenanceRunner",
    "RoundResult",
    "stable_owner",
]

import contextlib
import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from analytics.lake._delta import delta_interval as _interval
from analytics.lake._delta import last_checkpoint, open_table, restrict_commit
from analytics.lake._filesystem import Lake
from analytics.lake._schema import CHANGES, OUTCOMES
from analytics.lake.compaction import CompactionResult, compact, tier_target
from config import LakeSettings

logger = logging.getLogger(__name__)

MAINTENANCE_TABLE = "_maintenance"
_LEASE_SCHEMA = pa.schema([("owner", pa.string()), ("lease_until", pa.float64()), ("state", pa.string())])
# The lease table's own history is of no use to anyone: its removed files and log go within a day.
_LEASE_TABLE_CONFIGURATION = {
    "delta.deletedFileRetentionDuration": "interval 1 hours",
    "delta.logRetentionDuration": "interval 1 days",
}
_NO_RETRY = CommitProperties(max_commit_retries=0)

# Why commit time grew with the table: every delta-rs commit brings the table's snapshot forward, which
# carries each active file's statistics, and by default a file has min/max/null counts of its first 32
# columns (the changes table has 40). Measured (deltalake 1.6.6, local disk, 300 files, load 20 to 25):
# a 500-row append took 643 ms with the default statistics, 72 ms with those of five columns, 53 ms with
# one. So each table keeps statistics of the columns something prunes or reads by, and no more: the
# shards' high-water lookups (analytics.lake._high_water: stream, shard, sequence key; outcome id),
# compaction's overlap check (the same three), the first change time (`_read`, `snapshot`). A file
# written before the property was set keeps its statistics until compaction rewrites it.
_STATS_PROPERTY = "delta.dataSkippingStatsColumns"
STATS_COLUMNS: Mapping[str, tuple[str, ...]] = {
    CHANGES: ("stream_arn", "shard_id", "sequence_key", "created_at"),
    OUTCOMES: (
        "outcome_id",
        "occurred_at",
        "source_stream_arn",
        "source_shard_id",
        "source_sequence_key",
    ),
}


_SHIPPED = LakeSettings()


@dataclass(frozen=True, slots=True)
class MaintenancePolicy:
    """The cadence; its defaults are `LakeSettings`' (one source)."""

    checkpoint_interval: int = _SHIPPED.checkpoint_interval
    compact_every_commits: int = _SHIPPED.compact_every_commits
    first_tier_bytes: int = _SHIPPED.compact_first_tier_bytes
    fanout: int = _SHIPPED.compact_fanout
    tiers: int = _SHIPPED.compact_tiers
    lease_seconds: float = _SHIPPED.maintenance_lease_seconds
    check_seconds: float = _SHIPPED.maintenance_check_seconds
    removed_file_retention_hours: int = _SHIPPED.removed_file_retention_hours
    log_retention_hours: int = _SHIPPED.log_retention_hours

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> MaintenancePolicy:
        return cls(
            checkpoint_interval=settings.checkpoint_interval,
            compact_every_commits=settings.compact_every_commits,
            first_tier_bytes=settings.compact_first_tier_bytes,
            fanout=settings.compact_fanout,
            tiers=settings.compact_tiers,
            lease_seconds=settings.maintenance_lease_seconds,
            check_seconds=settings.maintenance_check_seconds,
            removed_file_retention_hours=settings.removed_file_retention_hours,
            log_retention_hours=settings.log_retention_hours,
        )

    def table_properties(self) -> dict[str, str]:
        """The table properties that carry the cadence, as every engine reads them."""
        return {
            "delta.checkpointInterval": str(self.checkpoint_interval),
            "delta.deletedFileRetentionDuration": _interval(self.removed_file_retention_hours),
            "delta.logRetentionDuration": _interval(self.log_retention_hours),
        }

    def properties_of(self, dataset: str) -> dict[str, str]:
        """What the leader keeps on `dataset`: the cadence, and the columns its files carry statistics
        of (`STATS_COLUMNS`), where it has such a list."""
        wanted = self.table_properties()
        columns = STATS_COLUMNS.get(dataset)
        if columns:
            wanted[_STATS_PROPERTY] = ",".join(columns)
        return wanted


@dataclass(frozen=True, slots=True)
class Lease:
    """The lease row: who holds it, until when (epoch seconds), and the cadence's state per table
    (`compacted`: the version of its last compaction; `rounds`: compactions run)."""

    owner: str
    lease_until: float
    compacted: Mapping[str, int] = field(default_factory=dict)
    rounds: Mapping[str, int] = field(default_factory=dict)


@dataclass
class RoundResult:
    """What one `step` did (counts only)."""

    leader: bool = False
    compacted: list[str] = field(default_factory=list)
    checkpointed: list[str] = field(default_factory=list)
    properties_set: list[str] = field(default_factory=list)
    compaction: CompactionResult = field(default_factory=CompactionResult)


class MaintenanceRunner:
    """One participant in the lake's maintenance. Every consumer child may run one: `step()` (or
    `poke()`, which runs a step on a background thread at most every `check_seconds`) takes or renews
    the lease when it can and, while it holds it, maintains each table whose turn has come.

    `owner` names this runner in the lease (a random id by default: no host or personal data);
    `clock` is epoch seconds (injectable for tests)."""

    def __init__(
        self,
        lake: Lake,
        policy: MaintenancePolicy | None = None,
        *,
        datasets: Iterable[str] = (CHANGES, OUTCOMES),
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lake = lake
        self._policy = policy or MaintenancePolicy()
        self._datasets = tuple(datasets)
        self.owner = owner or uuid.uuid4().hex
        self._clock = clock
        self._monotonic = monotonic
        self._tables: dict[str, DeltaTable] = {}
        self._checked: set[str] = set()
        self._held: Lease | None = None  # the lease row as this runner last committed it
        self._state: Lease | None = None  # the same with the cadence's state since
        self._last_poke: float | None = None
        self._running = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- the lease ------------------------------------------------------------------------------

    def _lease_table(self) -> DeltaTable:
        table = open_table(self._lake, MAINTENANCE_TABLE)
        if table is not None:
            return table
        # Created as `ensure_table` creates the lake's tables (version 0 only if absent, no retry: every
        # loser reopens the winner's), with the short retention of a table nobody reads the past of.
        with contextlib.suppress(CommitFailedError, DeltaError):
            DeltaTable.create(
                self._lake.table_uri(MAINTENANCE_TABLE),
                schema=_LEASE_SCHEMA,
                mode="ignore",
                configuration=dict(_LEASE_TABLE_CONFIGURATION),
                storage_options=dict(self._lake.storage_options) or None,
                commit_properties=_NO_RETRY,
            )
        table = open_table(self._lake, MAINTENANCE_TABLE)
        if table is None:
            raise TableNotFoundError("the maintenance lease table could not be created")
        restrict_commit(self._lake, MAINTENANCE_TABLE, int(table.version()))
        return table

    @staticmethod
    def read_lease(table: DeltaTable) -> Lease | None:
        """The lease row at `table`'s loaded version (None before anyone took it)."""
        rows = table.to_pyarrow_table().to_pylist()
        if not rows:
            return None
        row = rows[0]
        state = json.loads(row["state"] or "{}")
        return Lease(
            owner=str(row["owner"]),
            lease_until=float(row["lease_until"]),
            compacted={str(k): int(v) for k, v in state.get("compacted", {}).items()},
            rounds={str(k): int(v) for k, v in state.get("rounds", {}).items()},
        )

    def _commit_lease(self, table: DeltaTable, lease: Lease) -> bool:
        """Overwrite the lease row on the version `table` was read at; False when another runner
        committed first (nothing of ours landed)."""
        state = json.dumps({"compacted": dict(lease.compacted), "rounds": dict(lease.rounds)})
        row = pa.table(
            {
                "owner": pa.array([lease.owner], pa.string()),
                "lease_until": pa.array([lease.lease_until], pa.float64()),
                "state": pa.array([state], pa.string()),
            },
            schema=_LEASE_SCHEMA,
        )
        try:
            write_deltalake(table, row, mode="overwrite", commit_properties=_NO_RETRY)
        except CommitFailedError:
            return False
        restrict_commit(self._lake, MAINTENANCE_TABLE, int(table.version()))
        return True

    def hold(self) -> bool:
        """Take or renew the lease now; whether this runner holds it (a compaction outside the
        runner's own cadence asks this right before each table: `compaction.compact(exclusive=...)`,
        and gives the lease up after with `release`)."""
        return self._hold(renew=True)

    def _hold(self, *, renew: bool) -> bool:
        """Whether this runner holds the lease after taking or renewing it (renewed when `renew`, or
        past half-life). The renewing commit also records the cadence's state (`self._state`): one
        commit to the lease table per compaction round. A runner loses the lease when the row is no
        longer the one it last committed (it overran its lease and another runner took it)."""
        table = self._lease_table()
        current = self.read_lease(table)
        now = self._clock()
        if self._held is not None and current != self._held:
            logger.info("lake maintenance lease lost")
            self._held = self._state = None
        if (
            self._held is None
            and current is not None
            and current.lease_until > now
            and current.owner != self.owner
        ):
            # Another runner holds it. A lease under this runner's own owner is its earlier self's
            # (a consume restarted under the same worker id): taken back at once, not left to expire.
            return False
        if (
            self._held is not None
            and not renew
            and self._held.lease_until - now > self._policy.lease_seconds / 2
        ):
            return True
        base = self._state or current
        taken = Lease(
            owner=self.owner,
            lease_until=now + self._policy.lease_seconds,
            compacted=dict(base.compacted) if base else {},
            rounds=dict(base.rounds) if base else {},
        )
        if not self._commit_lease(table, taken):
            self._held = self._state = None
            return False
        if self._held is None:
            logger.info("lake maintenance lease taken")
        self._held = self._state = taken
        return True

    # -- the cadence ----------------------------------------------------------------------------

    def _table(self, dataset: str) -> DeltaTable | None:
        table = self._tables.get(dataset)
        if table is not None:
            try:
                table.update_incremental()
                return table
            except (DeltaError, FileNotFoundError):
                self._tables.pop(dataset, None)  # its log was cleaned away (an erasure): reopen
        table = open_table(self._lake, dataset)
        if table is not None:
            self._tables[dataset] = table
        return table

    def _ensure_properties(self, dataset: str, table: DeltaTable, result: RoundResult) -> None:
        if dataset in self._checked:
            return
        wanted = self._policy.properties_of(dataset)
        configuration = table.metadata().configuration
        missing = {k: v for k, v in wanted.items() if configuration.get(k) != v}
        if missing:
            # A metadata commit: concurrent appends lose their commit once and redo it on the new
            # version (analytics.lake._delta.append); it happens once per table and setting change.
            try:
                table.alter.set_table_properties(missing)
            except (DeltaError, FileNotFoundError):
                return  # tried again at the next look
            result.properties_set.append(dataset)
        self._checked.add(dataset)

    def _checkpoint_if_due(self, dataset: str, table: DeltaTable, result: RoundResult) -> None:
        """A checkpoint of the newest version once `checkpoint_interval` commits landed since the last.
        Written from the table opened afresh, not the runner's cached object: a checkpoint holds the
        state its writer read, and the cached one was last read a look ago."""
        last = last_checkpoint(self._lake, dataset)
        if int(table.version()) - (last if last is not None else -1) < self._policy.checkpoint_interval:
            return
        fresh = open_table(self._lake, dataset)
        if fresh is None:
            return
        try:
            fresh.create_checkpoint()
        except (DeltaError, FileNotFoundError):
            return  # a concurrent erasure's clean-up took the version away: the next look
        restrict_commit(self._lake, dataset, int(fresh.version()))
        result.checkpointed.append(dataset)

    def step(self) -> RoundResult:
        """One look: take or renew the lease if free, then maintain each table that is due."""
        result = RoundResult()
        if not self._hold(renew=False):
            return result
        result.leader = True
        for dataset in self._datasets:
            table = self._table(dataset)
            if table is None:
                continue
            self._ensure_properties(dataset, table, result)
            self._checkpoint_if_due(dataset, table, result)
            assert self._state is not None
            version = int(table.version())
            last = self._state.compacted.get(dataset, 0)
            if version - last < self._policy.compact_every_commits:
                continue
            # The whole lease is ahead of every compaction: renewed (or lost) right before it.
            if not self._hold(renew=True):
                result.leader = False
                return result
            assert self._state is not None
            round_number = self._state.rounds.get(dataset, 0) + 1
            target = tier_target(
                round_number, self._policy.first_tier_bytes, self._policy.fanout, self._policy.tiers
            )
            _merge(result.compaction, compact(self._lake, datasets=(dataset,), small_file_bytes=target))
            fresh = self._table(dataset)
            if fresh is not None:
                with contextlib.suppress(DeltaError, FileNotFoundError):
                    fresh.cleanup_metadata()  # log entries past retention, before the last checkpoint
            # Recorded by the next renewal: a leader lost before it only makes the next one compact
            # this table a round early.
            self._state = replace(
                self._state,
                compacted={**self._state.compacted, dataset: int(fresh.version()) if fresh else version},
                rounds={**self._state.rounds, dataset: round_number},
            )
            result.compacted.append(dataset)
        if result.compacted:
            self._clean_lease_table()
        return result

    def _clean_lease_table(self) -> None:
        table = open_table(self._lake, MAINTENANCE_TABLE)
        if table is None:
            return
        with contextlib.suppress(DeltaError, FileNotFoundError):
            table.vacuum(dry_run=False)
            table.cleanup_metadata()

    # -- in a consume process --------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Step every `check_seconds` until `stop` is set, then give the lease up so another runner
        takes over at its next look (a `consume` process's thread: `entitlements.compose`). A step's
        failure is logged by type only and the next look tries again: maintenance never stops the
        consumer."""
        while not stop.is_set():
            self._guarded_step()
            stop.wait(self._policy.check_seconds)
        with self._running:
            self.release()

    def release(self) -> None:
        """Give the lease up (its row kept, expired now, with the cadence's state), if held."""
        if self._state is None:
            return
        try:
            table = self._lease_table()
            if self.read_lease(table) == self._held:
                self._commit_lease(table, replace(self._state, lease_until=self._clock()))
        except (DeltaError, OSError) as error:  # the lease then expires on its own
            logger.warning("lake maintenance lease not released", extra={"error": type(error).__name__})
        self._held = self._state = None

    def _guarded_step(self) -> None:
        with self._running:
            try:
                self.step()
            except Exception as error:  # logged by type, and the next look retries
                logger.warning("lake maintenance step failed", extra={"error": type(error).__name__})

    # -- in a consumer child --------------------------------------------------------------------

    def poke(self) -> None:
        """Run a `step` on a background thread if `check_seconds` have passed since the last one and
        none is running (cheap to call after every flush). A step's failure is logged by type only:
        maintenance never fails the consumer, and the next look tries again."""
        now = self._monotonic()
        if self._last_poke is not None and now - self._last_poke < self._policy.check_seconds:
            return
        if not self._running.acquire(blocking=False):
            return
        self._last_poke = now
        self._thread = threading.Thread(target=self._background, name="lake-maintenance", daemon=True)
        self._thread.start()

    def _background(self) -> None:
        try:
            self.step()
        except Exception as error:  # logged by type, and the next look retries
            logger.warning("lake maintenance step failed", extra={"error": type(error).__name__})
        finally:
            self._running.release()

    def join(self, timeout: float | None = None) -> None:
        """Wait for a background step (tests, and an orderly shutdown)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)


def stable_owner(name: str) -> str:
    """A lease owner for the process `name` names (a consume's worker id): the same after a restart,
    so the restarted process takes its own lease back at once; a digest, so the lake holds no host
    name."""
    return hashlib.sha256(f"lake-maintenance/{name}".encode()).hexdigest()[:32]


def _merge(into: CompactionResult, outcome: CompactionResult) -> None:
    for name in (
        "files_merged",
        "files_written",
        "bytes_rewritten",
        "conflicts",
        "files_vacuumed",
        "not_leader",
    ):
        target: dict[str, int] = getattr(into, name)
        source: dict[str, int] = getattr(outcome, name)
        for key, value in source.items():
            target[key] += value
    for key, value in outcome.duplicates_dropped.items():
        into.duplicates_dropped[key] += value

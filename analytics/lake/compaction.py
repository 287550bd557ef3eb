"""Compaction: delta-rs's OPTIMIZE merges each partition's small files, one commit per table, then a
vacuum deletes the files it replaced once they are past the table's retention (7 days: readers of older
versions and time travel keep working meanwhile).

OPTIMIZE commits with `dataChange = false`: the rows are the same rows, so readers and snapshots (which
recognise a file rewritten from folded files by the commit's removes) are unchanged.

Exactly-once: the `changes` view dedupes only rows of files whose (stream, shard, sequence key) ranges
overlap another file's, so no file may hold two copies of an event. A landed file never does (the
buffer dedupes); a merge of overlapping files would. So before OPTIMIZE, each partition holding
overlapping files that do hold an event twice (a replay landed there; the identity columns are read to
know) is rewritten deduplicated in one commit that replaces exactly that partition's files, and
OPTIMIZE then runs on the version this run read, so a replay landing meanwhile is never merged into a
file of its own duplicates. Outcomes are deduplicated
on their identity the same way (the `outcomes` view dedupes every row; this only saves space).

Many writers keep appending while it runs (appends never conflict with it). Run one compactor per
table: a purge that commits first makes a compaction that read the purged files fail its commit
(Delta's conflict check), so a compaction never restores a purged row; the next run compacts again.
"""

from __future__ import annotations

__all__ = ["CompactionResult", "compact", "compact_continuously", "tier_target"]

import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError

from analytics.lake._delta import WRITER, active_files, append, open_table, restrict_commit
from analytics.lake._duck import arrow_table, connect, literal, path_list
from analytics.lake._files import TABLES, ensure_layout
from analytics.lake._filesystem import Lake
from analytics.lake._schema import (
    CHANGE_IDENTITY,
    CHANGES,
    OUTCOMES,
    PARTITION_COLUMN,
    AllowList,
    default_allow_list,
)
from schema.outcomes import FINAL_OUTCOME_PRECEDENCE

logger = logging.getLogger(__name__)


@dataclass
class CompactionResult:
    """Counts per table (no personal data)."""

    files_merged: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    files_written: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes_rewritten: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    conflicts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    files_vacuumed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    duplicates_dropped: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    not_leader: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # left to the leader


_FINAL_RANK = "list_position([{}], kind) NULLS LAST".format(
    ", ".join(f"'{kind.value}'" for kind in FINAL_OUTCOME_PRECEDENCE)
)


def _overlapping_partitions(table: DeltaTable, dataset: str) -> dict[str, list[str]]:
    """Partition day -> its files, for each partition where two files may hold one event (for
    outcomes: any partition of more than one file, since ids are not ranges)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    by_day: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in actions.to_pylist():
        by_day[str(row[f"partition.{PARTITION_COLUMN}"])].append(row)
    found: dict[str, list[str]] = {}
    for day, rows in by_day.items():
        if len(rows) < 2:
            continue
        if dataset == OUTCOMES:
            found[day] = [str(r["path"]) for r in rows]
            continue
        if _any_overlap(rows):
            found[day] = [str(r["path"]) for r in rows]
    return found


_DIMENSIONS = ("sequence_key", "shard_id", "stream_arn")


def _any_overlap(rows: list[dict[str, object]]) -> bool:
    """Whether two files' ranges overlap on every dimension (as the `change_files_to_dedupe` view
    judges; a file without statistics overlaps everything)."""
    spans = []
    for r in rows:
        bounds = [(r.get(f"min.{d}"), r.get(f"max.{d}")) for d in _DIMENSIONS]
        if any(low is None or high is None for low, high in bounds):
            return True
        spans.append(bounds)
    spans.sort(key=lambda bounds: str(bounds[0][0]))
    for index, (key, shard, stream) in enumerate(spans):
        for other_key, other_shard, other_stream in spans[index + 1 :]:
            if str(other_key[0]) > str(key[1]):
                break  # sorted by the first key: no later file overlaps this one's keys
            if (
                str(other_shard[0]) <= str(shard[1])
                and str(shard[0]) <= str(other_shard[1])
                and (str(other_stream[0]) <= str(stream[1]) and str(stream[0]) <= str(other_stream[1]))
            ):
                return True
    return False


def _surplus_rows(lake: Lake, dataset: str, files: list[str]) -> int:
    """How many rows of `files` repeat an identity (reads the identity columns only)."""
    identity = ", ".join(CHANGE_IDENTITY) if dataset == CHANGES else "outcome_id"
    con = connect(lake)
    try:
        source = f"read_parquet({path_list(lake, [f'{dataset}/{p}' for p in files])}, union_by_name = true)"
        counted = con.execute(
            f"SELECT count(*) - count(DISTINCT ({identity})) FROM {source}"  # noqa: S608
        ).fetchall()
    finally:
        con.close()
    return int(counted[0][0])


def _dedupe_partition(lake: Lake, table: DeltaTable, dataset: str, day: str, files: list[str]) -> int:
    """Rewrite one partition deduplicated, in one commit replacing its files; returns rows dropped."""
    identity = ", ".join(CHANGE_IDENTITY) if dataset == CHANGES else "outcome_id"
    keep = "sequence_key" if dataset == CHANGES else f"{_FINAL_RANK}, occurred_at"
    con = connect(lake)
    try:
        source = (
            f"read_parquet({path_list(lake, [f'{dataset}/{p}' for p in files])}, union_by_name = true, "
            "hive_partitioning = false)"
        )
        total = int(con.execute(f"SELECT count(*) FROM {source}").fetchall()[0][0])  # noqa: S608
        kept = arrow_table(
            con,
            f"SELECT *, DATE {literal(day)} AS {PARTITION_COLUMN} FROM {source} "  # noqa: S608
            f"QUALIFY row_number() OVER (PARTITION BY {identity} ORDER BY {keep}) = 1",
        )
    finally:
        con.close()
    append(
        lake,
        table,
        dataset,
        kept,
        mode="overwrite",
        partition_by=TABLES[dataset].partition_by,
        predicate=f"{PARTITION_COLUMN} = '{day}'",
    )
    return total - int(kept.num_rows)


# What a compaction racing a purge meets: its commit refused (Delta's conflict check), its snapshot's log
# or a file it planned to read deleted by the purge's clean-up (delta-rs raises FileNotFoundError for a
# missing object, DuckDB an IOException). The table is left for the next run; nothing was published.
_LOST_TO_A_CONCURRENT_COMMIT = (DeltaError, FileNotFoundError, duckdb.IOException)


def compact(
    lake: Lake,
    *,
    datasets: Iterable[str] = (CHANGES, OUTCOMES),
    small_file_bytes: int = 32 * 1024 * 1024,
    allow_list: AllowList | None = None,
    progress: Callable[[int, int], None] | None = None,
    exclusive: Callable[[], bool] | None = None,
) -> CompactionResult:
    """Merge each partition's files smaller than `small_file_bytes` into files of about that size (a
    partition holding one small file is left alone), then vacuum what is past retention. A table whose
    compaction lost to a concurrent purge (its commit refused, or the files or log it read cleaned
    away) is counted in `conflicts` and left for the next run. `progress(done, total)` is called before
    each table and at the end (a command's bar).

    Two delta-rs OPTIMIZEs planned on one version both commit and double the merged rows, so only the
    lake's maintenance leader compacts: `exclusive()`, asked right before each table, says whether this
    caller holds (or just took) the maintenance lease (`MaintenanceRunner.hold`); a table it is refused
    for is left alone and counted in `not_leader`. None: the caller holds it already (the runner)."""
    ensure_layout(lake, allow_list or default_allow_list())
    result = CompactionResult()
    datasets = tuple(datasets)
    for done, dataset in enumerate(datasets):
        if progress is not None:
            progress(done, len(datasets))
        if exclusive is not None and not exclusive():
            result.not_leader[dataset] += 1
            logger.info("compaction left to the maintenance leader", extra={"table": dataset})
            continue
        try:
            _compact_table(lake, dataset, small_file_bytes, result)
        except _LOST_TO_A_CONCURRENT_COMMIT as error:
            result.conflicts[dataset] += 1
            logger.info(
                "compaction lost to a concurrent commit",
                extra={"table": dataset, "error": type(error).__name__},
            )
    if progress is not None:
        progress(len(datasets), len(datasets))
    logger.info("compaction done", extra={"files_merged": sum(result.files_merged.values())})
    return result


def _compact_table(lake: Lake, dataset: str, small_file_bytes: int, result: CompactionResult) -> None:
    table = open_table(lake, dataset)
    if table is None:
        return
    skipped: set[str] = set()
    sizes = dict(active_files(table))
    for day, files in sorted(_overlapping_partitions(table, dataset).items()):
        if not _surplus_rows(lake, dataset, files):
            continue  # ranges overlap (files spanning shards) but no event is there twice
        try:
            result.duplicates_dropped[dataset] += _dedupe_partition(lake, table, dataset, day, files)
            result.bytes_rewritten[dataset] += sum(sizes.get(f, 0) for f in files)
        except (CommitFailedError, DeltaError):
            skipped.add(day)  # a concurrent commit touched it: left for the next run
            result.conflicts[dataset] += 1
    if skipped:
        logger.info("compaction left partitions with a concurrent commit", extra={"partitions": len(skipped)})
        return
    try:
        metrics = table.optimize.compact(target_size=small_file_bytes, writer_properties=WRITER)
    except (CommitFailedError, DeltaError):
        result.conflicts[dataset] += 1
        logger.info("compaction lost its commit to a concurrent rewrite", extra={"table": dataset})
        return
    result.files_merged[dataset] += int(metrics.get("numFilesRemoved") or 0)
    result.files_written[dataset] += int(metrics.get("numFilesAdded") or 0)
    removed = metrics.get("filesRemoved") or {}
    if isinstance(removed, str):  # delta-rs reports the files' statistics as JSON text
        removed = json.loads(removed)
    result.bytes_rewritten[dataset] += int(removed.get("totalSize") or 0) if isinstance(removed, dict) else 0
    restrict_commit(lake, dataset, int(table.version()))
    result.files_vacuumed[dataset] += len(table.vacuum(dry_run=False))


def tier_target(round_number: int, first_tier_bytes: int, fanout: int, tiers: int) -> int:
    """The file size round `round_number` (from 1) of continuous compaction merges up to: the highest
    tier k < `tiers` whose period `fanout**k` divides the round."""
    tier = 0
    while tier + 1 < tiers and round_number % fanout ** (tier + 1) == 0:
        tier += 1
    return int(first_tier_bytes * fanout**tier)


def compact_continuously(
    lake: Lake,
    *,
    interval_seconds: float = 300.0,
    first_tier_bytes: int = 8 * 1024 * 1024,
    fanout: int = 8,
    tiers: int = 3,
    rounds: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_round: Callable[[CompactionResult], None] | None = None,
    exclusive: Callable[[], bool] | None = None,
) -> None:
    """The one compactor of the lake's tables: a run every `interval_seconds` (for `rounds` runs, or until
    interrupted), tiered so that a row is rewritten about once per tier, not once per run.

    Tier k merges the files smaller than `first_tier_bytes * fanout**k` and runs every `fanout**k`-th
    round: tier 0 each round merges what landed since; tier 1 every `fanout` rounds merges tier 0's
    files; and so on. Set `first_tier_bytes` near what lands in a partition between two runs: then a
    landed row is rewritten about `tiers` times in all, and a partition-day keeps a few files per tier
    (schema/lake.md, "Compaction"). `exclusive`: as for `compact`, asked before each table.
    """
    done = 0
    while rounds is None or done < rounds:
        done += 1
        target = tier_target(done, first_tier_bytes, fanout, tiers)
        result = compact(lake, small_file_bytes=target, exclusive=exclusive)
        if on_round is not None:
            on_round(result)
        if rounds is None or done < rounds:
            sleep(interval_seconds)

"""Migration of a lake in the old format (Parquet files named by what they hold, schema anchors, snapshot
manifests, a rewrite lock file) to Delta tables, in place and resumably.

For `changes` and `outcomes`, each partition's old files (every `.parquet` file that is not a Delta data
file `part-*`, schema anchors aside) are appended as ONE commit whose metadata names them
(`lake.migrated_from`), then deleted. A run that died after a commit finds the names in the log and
only deletes the files; one that died before it appends them again from the start (nothing of the
partition was published). Replays that the old files held twice are migrated once (a partition's rows
are deduplicated on the event's identity before its commit).

A table holding Delta data files but no `_delta_log` commit is not the old format but a Delta table
whose log was lost: `migrate` refuses the lake (`TableLogMissing`) before touching anything.

Old as-of states (`snapshots/as_of/<instant>.parquet`) become states of the `snapshots/as_of` table.
The old snapshot (state files and manifests) is deleted and rebuilt from the migrated `changes`; then the
anchors and the lock file go. Every step is idempotent: run it again until it reports nothing left.
"""

from __future__ import annotations

__all__ = ["MIGRATED_FROM", "MigrationResult", "migrate", "old_format_files"]

import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from analytics.lake._delta import LOG_DIR, append
from analytics.lake._errors import TableLogMissing
from analytics.lake._files import AS_OF_DIR, TABLES, ensure_layout
from analytics.lake._filesystem import Lake
from analytics.lake._fold import conform, read_table
from analytics.lake._schema import (
    AUDIT_FAILURES,
    CHANGE_IDENTITY,
    CHANGES,
    OUTCOMES,
    PARTITION_COLUMN,
    SNAPSHOTS,
    STATE_DIR,
    AllowList,
    default_allow_list,
)
from analytics.lake.snapshots import snapshot

logger = logging.getLogger(__name__)

MIGRATED_FROM = "lake.migrated_from"
_OLD_LOCK = ".rewrite.lock"
_OLD_MANIFESTS = f"{SNAPSHOTS}/manifests"
_ANCHOR = "_schema.parquet"


@dataclass
class MigrationResult:
    """Counts only."""

    files_migrated: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    rows_migrated: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    commits: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    files_deleted: int = 0
    snapshot_rebuilt: bool = False


def _files(lake: Lake, directory: str) -> list[pafs.FileInfo]:
    selector = pafs.FileSelector(lake.path(directory), recursive=True, allow_not_found=True)
    return [
        info
        for info in lake.fs.get_file_info(selector)
        if info.type == pafs.FileType.File and f"/{LOG_DIR}/" not in f"/{lake.relative(info.path)}"
    ]


def _old_data_files(lake: Lake, directory: str) -> list[str]:
    """Lake-relative old-format data files under `directory` (not Delta's `part-*`, not anchors)."""
    return sorted(
        lake.relative(info.path)
        for info in _files(lake, directory)
        if info.base_name.endswith(".parquet") and not info.base_name.startswith(("part-", "_", "."))
    )


def _migrated(lake: Lake, table: object) -> set[str]:
    done: set[str] = set()
    for commit in table.history():  # type: ignore[attr-defined]
        raw = commit.get(MIGRATED_FROM)
        if raw:
            done |= set(json.loads(raw))
    return done


def _day(relative: str) -> date:
    for part in relative.split("/"):
        if part.startswith(f"{PARTITION_COLUMN}="):
            return date.fromisoformat(part.split("=", 1)[1])
    raise ValueError("an old data file outside any partition")


def _delete(lake: Lake, relative: str) -> bool:
    try:
        lake.fs.delete_file(lake.path(relative))
    except FileNotFoundError:
        return False
    return True


def _unify(tables: list[pa.Table], declared: pa.Schema) -> pa.Table:
    """Old files under older schemas: the union of the declared columns and every file's."""
    unified = pa.unify_schemas([declared, *(t.schema for t in tables)], promote_options="permissive")
    return pa.concat_tables([conform(t, unified) for t in tables])


def _first_per_identity(table: pa.Table, name: str) -> pa.Table:
    """One row per event (changes) or per outcome id and kind (outcomes): old files of one partition may
    hold a replay twice, and one Delta data file must never hold two copies of an event (the `changes`
    view dedupes only rows of files whose ranges overlap)."""
    identity = list(CHANGE_IDENTITY) if name == CHANGES else ["outcome_id", "kind"]
    numbered = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    first = numbered.group_by(identity, use_threads=False).aggregate([("_row", "min")])["_row_min"]
    # The aggregate's values are the row numbers to keep (sorted, so the old files' order is kept);
    # its own positions are group numbers, not rows.
    return table.take(pc.take(first, pc.sort_indices(first)))


def _migrate_partitioned(
    lake: Lake, name: str, tables: dict[str, object], allow: AllowList, result: MigrationResult
) -> None:
    table = tables[name]
    done = _migrated(lake, table)
    by_day: dict[date, list[str]] = defaultdict(list)
    for relative in _old_data_files(lake, name):
        if _day(relative).year == 1970:
            continue  # the old schema anchors' partition
        by_day[_day(relative)].append(relative)
    declared = TABLES[name].schema(allow)
    declared = declared.remove(declared.get_field_index(PARTITION_COLUMN))
    for day, files in sorted(by_day.items()):
        pending = [f for f in files if f not in done]
        if pending:
            data = _first_per_identity(_unify([read_table(lake, f) for f in pending], declared), name)
            data = data.append_column(
                pa.field(PARTITION_COLUMN, pa.date32()), pa.array([day] * data.num_rows, pa.date32())
            )
            append(
                lake,
                table,  # type: ignore[arg-type]
                name,
                data,
                partition_by=TABLES[name].partition_by,
                custom_metadata={MIGRATED_FROM: json.dumps(pending)},
            )
            result.commits[name] += 1
            result.files_migrated[name] += len(pending)
            result.rows_migrated[name] += data.num_rows
        for relative in files:
            result.files_deleted += _delete(lake, relative)


def _migrate_as_of(lake: Lake, tables: dict[str, object], allow: AllowList, result: MigrationResult) -> None:
    table = tables[AS_OF_DIR]
    done = _migrated(lake, table)
    declared = TABLES[AS_OF_DIR].schema(allow)
    for relative in _old_data_files(lake, AS_OF_DIR):
        if relative not in done:
            instant = datetime.strptime(
                relative.rsplit("/", 1)[-1].removesuffix(".parquet"), "%Y%m%dT%H%M%S%fZ"
            )
            state = read_table(lake, relative)
            stamped = state.append_column(
                pa.field("as_of", pa.timestamp("us", tz="UTC")),
                pa.array([instant.replace(tzinfo=UTC)] * state.num_rows, pa.timestamp("us", tz="UTC")),
            )
            append(
                lake,
                table,  # type: ignore[arg-type]
                AS_OF_DIR,
                _unify([stamped], declared),
                custom_metadata={MIGRATED_FROM: json.dumps([relative])},
            )
            result.commits[AS_OF_DIR] += 1
            result.files_migrated[AS_OF_DIR] += 1
            result.rows_migrated[AS_OF_DIR] += state.num_rows
        result.files_deleted += _delete(lake, relative)


def _leftovers(lake: Lake) -> list[str]:
    """The old format's files that carry no data: snapshot state and manifests, anchors, the lock."""
    found = [
        lake.relative(info.path)
        for directory in (STATE_DIR, _OLD_MANIFESTS)
        for info in _files(lake, directory)
        if not info.base_name.startswith("part-")
    ]
    found += [
        lake.relative(info.path)
        for directory in (CHANGES, OUTCOMES, AS_OF_DIR)
        for info in _files(lake, directory)
        if info.base_name == _ANCHOR
    ]
    if lake.fs.get_file_info(lake.path(_OLD_LOCK)).type == pafs.FileType.File:
        found.append(_OLD_LOCK)
    return sorted(found)


def _tables_without_log(lake: Lake) -> list[str]:
    """The lake's tables that hold Delta data files (`part-*`) but not one commit in `_delta_log`."""
    lost = []
    for name in (*TABLES, AUDIT_FAILURES):
        selector = pafs.FileSelector(lake.path(name), recursive=True, allow_not_found=True)
        infos = [i for i in lake.fs.get_file_info(selector) if i.type == pafs.FileType.File]
        logged = any(
            f"/{LOG_DIR}/" in f"/{lake.relative(i.path)}" and i.base_name.endswith((".json", ".parquet"))
            for i in infos
        )
        data = any(
            f"/{LOG_DIR}/" not in f"/{lake.relative(i.path)}"
            and i.base_name.startswith("part-")
            and i.base_name.endswith(".parquet")
            for i in infos
        )
        if data and not logged:
            lost.append(name)
    return lost


def migrate(lake: Lake, *, allow_list: AllowList | None = None) -> MigrationResult:
    """Convert an old-format lake in place (see the module's docstring); safe to run again.

    Raises `TableLogMissing`, touching nothing, when a table holds Delta data files but no log: that
    is a Delta table whose log was lost, not the old format (migrating it would publish an empty table
    over its files)."""
    lost = _tables_without_log(lake)
    if lost:
        raise TableLogMissing(lake.uri, lost)
    allow = allow_list or default_allow_list()
    result = MigrationResult()
    leftovers = _leftovers(lake)
    old_state = [p for p in leftovers if p.startswith(STATE_DIR)]
    tables: dict[str, object] = dict(ensure_layout(lake, allow))
    for name in (CHANGES, OUTCOMES):
        _migrate_partitioned(lake, name, tables, allow, result)
    _migrate_as_of(lake, tables, allow, result)
    for relative in leftovers:
        result.files_deleted += _delete(lake, relative)
    if old_state or result.commits.get(CHANGES):
        snapshot(lake, full=True, allow_list=allow)
        result.snapshot_rebuilt = True
    logger.info("lake migrated", extra={"files": sum(result.files_migrated.values())})
    return result


def old_format_files(lake: Lake) -> list[str]:
    """What of the old format is left (empty once migrated)."""
    return sorted(
        [
            *_old_data_files(lake, CHANGES),
            *_old_data_files(lake, OUTCOMES),
            *_old_data_files(lake, AS_OF_DIR),
            *_leftovers(lake),
        ]
    )

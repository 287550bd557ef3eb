"""Snapshots: the change log folded into the table's state, one row per item (pk, sk).

An item's state is its image after the change with the highest sequence key (ties cannot happen for
distinct events; duplicates of one event are identical). A REMOVE leaves a *tombstone* (`deleted`
true): readers drop tombstones, but the state keeps them so that a replayed older event of a removed
item can never bring it back. Folding is therefore idempotent and order-free: any set of change rows,
folded in any grouping, with any duplicates, gives the same state.

The state is the Delta table `snapshots/state`: a base fold plus delta folds, the state being the latest
row per item across them. Every row carries `folded_version`, the version of `changes` its run folded
through; the watermark is the highest, read from the table's file statistics (so it survives an
erasure's log clean-up). A run is one commit: a delta is an append, a rebuild or a consolidation an
overwrite.

An incremental run reads the `changes` log from the watermark to the latest version and folds only the
data files those commits added that are still current. A file a compaction, a dedupe or a purge wrote
from files that were all folded holds folded rows and is not read (its lineage is the commit's removes).
When the log no longer reaches back to the watermark (an erasure cleaned it), the run rebuilds from the
whole table. Deltas are merged into a new base past `consolidate_ratio` of the base (or `max_deltas`).

Time axis: `--as-of` and `through_created_at` use the stream's creation time (`created_at`,
ApproximateCreationDateTime), not business time from the items; sequence order decides which image is
latest. `state_at_version` is time travel on the `changes` table itself: the state as of a version (or
an instant of the table's own commit clock), while the log still holds it.

A snapshot never folds a user being erased (the lake's mask): a snapshot that runs beside a purge
cannot write the purged rows back.
"""

from __future__ import annotations

__all__ = [
    "AS_OF_DIR",
    "SnapshotInfo",
    "SnapshotResult",
    "read_snapshot",
    "snapshot",
    "snapshot_as_of",
    "snapshot_info",
    "state_as_of",
    "state_at_version",
]

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from analytics.lake._delta import active_files, append, commits_since, open_table
from analytics.lake._duck import connect, literal, path_list
from analytics.lake._files import AS_OF_DIR, TABLES, ensure_layout
from analytics.lake._filesystem import Lake
from analytics.lake._fold import Source, fold
from analytics.lake._mask import read_mask
from analytics.lake._read import require_as_of, require_data
from analytics.lake._schema import CHANGES, STATE_DIR, AllowList, default_allow_list, state_schema
from analytics.lake._versions import load_version
from schema.table import USER_PK_PREFIX

logger = logging.getLogger(__name__)

FOLDED_VERSION = "folded_version"
_REWRITES = frozenset({"OPTIMIZE", "DELETE"})


@dataclass(frozen=True)
class SnapshotInfo:
    """The current snapshot, from the state table's file statistics."""

    version: int  # the state table's version
    folded_version: int  # the `changes` version folded through
    through_created_at: datetime | None  # the latest stream creation time folded in
    base_rows: int
    delta_rows: int
    deltas: int
    state_files: tuple[str, ...]  # lake-relative


@dataclass(frozen=True)
class SnapshotResult:
    """What a run did (counts only)."""

    version: int | None
    as_of: datetime | None
    path: str | None  # the table written, lake-relative (None when nothing new)
    full: bool
    consolidated: bool
    files_read: int
    files_skipped_by_lineage: int
    rows_read: int
    rows_written: int
    through_created_at: datetime | None


def _stat(actions: pa.Table, name: str) -> list[Any]:
    return actions[name].to_pylist() if name in actions.column_names else [None] * actions.num_rows


def snapshot_info(lake: Lake) -> SnapshotInfo | None:
    """The current snapshot, or None before the first (or when the state is empty)."""
    table = open_table(lake, STATE_DIR)
    if table is None:
        return None
    actions = pa.table(table.get_add_actions(flatten=True))
    if not actions.num_rows:
        return None
    highs = [v for v in _stat(actions, f"max.{FOLDED_VERSION}") if v is not None]
    lows = [v for v in _stat(actions, f"min.{FOLDED_VERSION}") if v is not None]
    if not highs:
        return None
    base = min(lows)
    rows = _stat(actions, "num_records")
    base_rows = delta_rows = 0
    deltas: set[int] = set()
    for high, count in zip(_stat(actions, f"max.{FOLDED_VERSION}"), rows, strict=True):
        if high == base:
            base_rows += count or 0
        else:
            delta_rows += count or 0
            deltas.add(high)
    changed = [v for v in _stat(actions, "max.changed_at") if v is not None]
    through = max(changed) if changed else None
    if isinstance(through, datetime) and through.tzinfo is None:
        through = through.replace(tzinfo=UTC)
    return SnapshotInfo(
        version=int(table.version()),
        folded_version=int(max(highs)),
        through_created_at=through if isinstance(through, datetime) else None,
        base_rows=base_rows,
        delta_rows=delta_rows,
        deltas=len(deltas),
        state_files=tuple(f"{STATE_DIR}/{p}" for p, _ in active_files(table)),
    )


def _unfolded(lake: Lake, changes: DeltaTable, since: int) -> tuple[list[str], int] | None:
    """Current `changes` files holding rows added after version `since` (lake-relative), and how many
    rewritten files were skipped as holding only folded rows; None when the log does not reach back."""
    latest = int(changes.version())
    actions = commits_since(lake, CHANGES, since, latest)
    if actions is None:
        return None
    current = {p for p, _ in active_files(changes)}
    added: set[str] = set()
    skipped = 0
    for commit in actions:
        operation = next((a["commitInfo"].get("operation") for a in commit if "commitInfo" in a), None)
        adds = {a["add"]["path"] for a in commit if "add" in a}
        removes = {a["remove"]["path"] for a in commit if "remove" in a}
        if (operation in _REWRITES or removes) and not removes & added:
            skipped += len(adds & current)
            continue
        added |= adds
    return sorted(f"{CHANGES}/{p}" for p in added & current), skipped


def _mask_where(lake: Lake, where: str = "") -> str:
    """`where` and a filter dropping every user being erased (user_id, or pk `USER#<id>`)."""
    masked = sorted(read_mask(lake))
    clauses = [where.removeprefix("WHERE ").strip()] if where else []
    if masked:
        ids = ", ".join(literal(u) for u in masked)
        pks = ", ".join(literal(f"{USER_PK_PREFIX}{u}") for u in masked)
        clauses.append(f"coalesce(user_id, '') NOT IN ({ids}) AND coalesce(pk, '') NOT IN ({pks})")
    return f"WHERE {' AND '.join(f'({c})' for c in clauses)}" if clauses else ""


def _rows_and_latest(
    lake: Lake, changes: DeltaTable, files: list[str], where: str
) -> tuple[int, datetime | None]:
    """How many rows `files` hold and their latest stream creation time (of the rows `where` keeps),
    from the Delta log's file statistics (no data read) when they are complete and no user is masked;
    else from one scan."""
    if not files:
        return 0, None
    actions = pa.table(changes.get_add_actions(flatten=True))
    stats = {
        f"{CHANGES}/{path}": (count, latest)
        for path, count, latest in zip(
            _stat(actions, "path"),
            _stat(actions, "num_records"),
            _stat(actions, "max.created_at"),
            strict=True,
        )
    }
    wanted = [stats.get(f) for f in files]
    if not where and all(w is not None and w[0] is not None and isinstance(w[1], datetime) for w in wanted):
        rows = sum(int(w[0]) for w in wanted if w is not None)
        latest = max(w[1] for w in wanted if w is not None)
        return rows, latest.replace(tzinfo=UTC) if latest.tzinfo is None else latest.astimezone(UTC)
    return _count_rows(lake, files), _max_created(lake, files, where)


def _max_created(lake: Lake, files: list[str], where: str = "") -> datetime | None:
    if not files:
        return None
    con = connect(lake)
    try:
        source = f"read_parquet({path_list(lake, files)}, union_by_name = true, hive_partitioning = false)"
        value = con.execute(f"SELECT epoch_us(max(created_at)) FROM {source} {where}").fetchall()[0][0]  # noqa: S608
    finally:
        con.close()
    return None if value is None else datetime.fromtimestamp(value / 1_000_000, UTC)


def _collect(tables: Iterator[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables([schema.empty_table(), *tables])


def _with_version(table: pa.Table, version: int) -> pa.Table:
    return table.append_column(
        pa.field(FOLDED_VERSION, pa.int64()), pa.array([version] * table.num_rows, pa.int64())
    )


def _count_rows(lake: Lake, files: list[str]) -> int:
    if not files:
        return 0
    con = connect(lake)
    try:
        source = f"read_parquet({path_list(lake, files)}, union_by_name = true, hive_partitioning = false)"
        return int(con.execute(f"SELECT count(*) FROM {source}").fetchall()[0][0])  # noqa: S608
    finally:
        con.close()


def snapshot(
    lake: Lake,
    *,
    full: bool = False,
    allow_list: AllowList | None = None,
    consolidate_ratio: float = 0.5,
    max_deltas: int = 8,
    now: datetime | None = None,
) -> SnapshotResult:
    """Fold new changes into the current snapshot (or rebuild it from the whole table with `full`), in
    one commit of the state table. A crash leaves the previous snapshot as it was."""
    del now  # the commit's own timestamp records when it ran
    require_data(lake)  # a snapshot of no lake is an error, never an empty lake made for it
    allow = allow_list or default_allow_list()
    schema = state_schema(allow)
    tables = ensure_layout(lake, allow)
    changes, state = tables[CHANGES], tables[STATE_DIR]
    info = None if full else snapshot_info(lake)
    target = int(changes.version())
    unfolded = None if info is None else _unfolded(lake, changes, info.folded_version)
    rebuild = unfolded is None
    if unfolded is None:
        to_read = [f"{CHANGES}/{p}" for p, _ in active_files(changes)]
        skipped = 0
    else:
        to_read, skipped = unfolded
    where = _mask_where(lake)
    rows_read, through = _rows_and_latest(lake, changes, to_read, where)
    if info is not None and info.through_created_at is not None and not rebuild:
        through = max(through, info.through_created_at) if through else info.through_created_at
    rows_written = 0
    written: str | None = None
    consolidated = False
    version: int | None = info.version if info else None
    if rebuild or to_read:
        folded = _collect(
            fold(lake, [Source("changes", tuple(to_read), where)], allow, live_only=False), schema
        )
        rows_written = folded.num_rows
        written = STATE_DIR
        version = append(
            lake,
            state,
            STATE_DIR,
            _with_version(folded, target),
            mode="overwrite" if rebuild else "append",
            partition_by=TABLES[STATE_DIR].partition_by,
        )
        after = snapshot_info(lake)
        if (
            not rebuild
            and after is not None
            and after.deltas
            and (after.delta_rows > consolidate_ratio * max(after.base_rows, 1) or after.deltas > max_deltas)
        ):
            state_files = list(after.state_files)
            merged = _collect(
                fold(lake, [Source("state", tuple(state_files), where)], allow, live_only=False), schema
            )
            version = append(lake, state, STATE_DIR, _with_version(merged, target), mode="overwrite")
            consolidated = True
    logger.info(
        "snapshot written", extra={"files_read": len(to_read), "files_covered": skipped, "rows": rows_read}
    )
    return SnapshotResult(
        version=version,
        as_of=None,
        path=written,
        full=rebuild,
        consolidated=consolidated,
        files_read=len(to_read),
        files_skipped_by_lineage=skipped,
        rows_read=rows_read,
        rows_written=rows_written,
        through_created_at=through,
    )


def read_snapshot(
    lake: Lake, *, include_deleted: bool = False, allow_list: AllowList | None = None
) -> pa.Table:
    """The current snapshot's state (live items only unless `include_deleted`); empty before the first."""
    allow = allow_list or default_allow_list()
    schema = state_schema(allow)
    require_data(lake)
    info = snapshot_info(lake)
    if info is None:
        return schema.empty_table()
    sources = [Source("state", info.state_files, _mask_where(lake))]
    return _collect(fold(lake, sources, allow, live_only=not include_deleted), schema)


def _as_of_sources(lake: Lake, as_of: datetime) -> list[Source]:
    """What the state at `as_of` (stream creation time) folds: the current snapshot plus the changes it
    has not folded, created by then, when the snapshot folded nothing later; else the whole table,
    filtered on created_at (only partitions up to the instant's date are read)."""
    as_of = as_of.astimezone(UTC)
    where = _mask_where(lake, f"WHERE created_at <= TIMESTAMPTZ '{as_of.isoformat()}'")
    changes = open_table(lake, CHANGES)
    files = [
        f"{CHANGES}/{p}"
        for p, _ in active_files(changes)
        if not p.startswith("event_date=") or p.split("/", 1)[0].split("=", 1)[1] <= as_of.date().isoformat()
    ]
    info = snapshot_info(lake)
    if changes is not None and info and info.through_created_at and info.through_created_at <= as_of:
        unfolded = _unfolded(lake, changes, info.folded_version)
        if unfolded is not None:
            wanted = set(files)
            return [
                Source("state", info.state_files, _mask_where(lake)),
                Source("changes", tuple(f for f in unfolded[0] if f in wanted), where),
            ]
    return [Source("changes", tuple(files), where)]


def state_as_of(lake: Lake, as_of: datetime, *, allow_list: AllowList | None = None) -> pa.Table:
    """The table's live items as they stood at `as_of` (stream creation time, inclusive). Reads only;
    raises `NoDataAsOf` when `as_of` is before the lake's first change."""
    require_as_of(lake, as_of)
    allow = allow_list or default_allow_list()
    return _collect(fold(lake, _as_of_sources(lake, as_of), allow, live_only=True), state_schema(allow))


def state_at_version(lake: Lake, version: int | datetime, *, allow_list: AllowList | None = None) -> pa.Table:
    """Time travel: the live items as the `changes` table held them at `version` (a version number,
    or an instant of the table's commit clock). Raises `VersionRemoved` when the log no longer holds
    that version (an erasure ends time travel across it)."""
    allow = allow_list or default_allow_list()
    changes = require_data(lake)
    load_version(lake, CHANGES, changes, version)
    files = tuple(f"{CHANGES}/{p}" for p, _ in active_files(changes))
    source = Source("changes", files, _mask_where(lake))
    return _collect(fold(lake, [source], allow, live_only=True), state_schema(allow))


def snapshot_as_of(lake: Lake, as_of: datetime, *, allow_list: AllowList | None = None) -> SnapshotResult:
    """Write the state at `as_of` to the `snapshots/as_of` table (one commit replacing any earlier state
    at the same instant; the current snapshot is left as it is)."""
    allow = allow_list or default_allow_list()
    require_as_of(lake, as_of)
    tables = ensure_layout(lake, allow)
    as_of = as_of.astimezone(UTC)
    sources = _as_of_sources(lake, as_of)
    state = _collect(fold(lake, sources, allow, live_only=True), state_schema(allow))
    stamped = state.append_column(
        pa.field("as_of", pa.timestamp("us", tz="UTC")),
        pc.cast(
            pa.array([as_of] * state.num_rows, pa.timestamp("us", tz="UTC")), pa.timestamp("us", tz="UTC")
        ),
    )
    append(
        lake,
        tables[AS_OF_DIR],
        AS_OF_DIR,
        stamped,
        mode="overwrite",
        predicate=f"as_of = '{as_of.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}'",
    )
    files_read = sum(len(s.files) for s in sources if s.kind == "changes")
    return SnapshotResult(
        version=None,
        as_of=as_of,
        path=AS_OF_DIR,
        full=False,
        consolidated=False,
        files_read=files_read,
        files_skipped_by_lineage=0,
        rows_read=0,
        rows_written=state.num_rows,
        through_created_at=None,
    )

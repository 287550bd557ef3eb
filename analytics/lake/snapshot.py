"""Snapshots: the change log folded into the table's state, one row per item (pk, sk).

An item's state is its image after the change with the highest sequence key (ties cannot happen for
distinct events; duplicates of one event are identical). A REMOVE leaves a *tombstone* (`deleted`
true): readers drop tombstones, but the state keeps them so that a replayed older event of a removed
item can never bring it back. Folding is therefore idempotent and order-free: any set of change files,
folded in any grouping, with any duplicates, gives the same state.

Layout (all under `snapshots/`):
- `state/base-<version>.parquet`, `state/delta-<version>.parquet`: the state is a base plus deltas; each
  file is a fold of some change files, and the state is the latest row per item across them.
- `manifests/<version>.json`: which state files make the current state, and the watermark: every change
  file already folded (path and size). The newest manifest is the current snapshot.
- `as_of/<instant>.parquet`: states at past instants (`snapshot_as_of`).

An incremental run lists the change files, folds only those the manifest has not seen (a compacted file
whose inputs were all folded is recognised from its lineage and not read), and writes one delta: its cost
grows with the new changes, not with the history. When the deltas grow past `consolidate_ratio` of the
base (or `max_deltas` files) they are folded into a new base.

Time axis: `--as-of` and `through_created_at` use the stream's creation time (`created_at`,
ApproximateCreationDateTime), not business time from the items (which the simulator runs on a simulated
clock); sequence order decides which image is latest.
"""

from __future__ import annotations

__all__ = [
    "AS_OF_DIR",
    "MANIFEST_DIR",
    "SnapshotManifest",
    "SnapshotResult",
    "StateFile",
    "read_manifest",
    "read_snapshot",
    "snapshot",
    "snapshot_as_of",
    "state_as_of",
]

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.lake._duck import connect, path_list
from analytics.lake._files import (
    FileEntry,
    delete_file,
    ensure_layout,
    list_files,
    list_parquet,
    read_bytes,
    write_bytes_atomic,
    write_parquet_atomic,
)
from analytics.lake._filesystem import Lake
from analytics.lake._fold import Source, classify, fold
from analytics.lake._rewrite_lock import rewrites_lake
from analytics.lake._schema import (
    CHANGES,
    PARTITION_COLUMN,
    SNAPSHOTS,
    STATE_DIR,
    AllowList,
    default_allow_list,
    state_schema,
)

logger = logging.getLogger(__name__)

MANIFEST_DIR = f"{SNAPSHOTS}/manifests"
AS_OF_DIR = f"{SNAPSHOTS}/as_of"
_BATCH_ROWS = 262_144


@dataclass(frozen=True, slots=True)
class StateFile:
    path: str
    rows: int
    kind: str  # "base" or "delta"


@dataclass(frozen=True)
class SnapshotManifest:
    version: int
    taken_at: datetime  # wall clock of the run
    through_created_at: datetime | None  # the latest stream creation time folded in
    state_files: tuple[StateFile, ...]
    folded: Mapping[str, int] = field(default_factory=dict)  # change file -> size

    @property
    def base_rows(self) -> int:
        return sum(f.rows for f in self.state_files if f.kind == "base")

    @property
    def delta_rows(self) -> int:
        return sum(f.rows for f in self.state_files if f.kind == "delta")

    def to_json(self) -> bytes:
        document = {
            "format": 1,
            "version": self.version,
            "taken_at": self.taken_at.isoformat(),
            "through_created_at": self.through_created_at.isoformat() if self.through_created_at else None,
            "state_files": [{"path": f.path, "rows": f.rows, "kind": f.kind} for f in self.state_files],
            "folded": dict(sorted(self.folded.items())),
        }
        return json.dumps(document, indent=1).encode()

    @classmethod
    def from_json(cls, payload: bytes) -> SnapshotManifest:
        document = json.loads(payload)
        through = document.get("through_created_at")
        return cls(
            version=int(document["version"]),
            taken_at=datetime.fromisoformat(document["taken_at"]),
            through_created_at=datetime.fromisoformat(through) if through else None,
            state_files=tuple(
                StateFile(str(f["path"]), int(f["rows"]), str(f["kind"])) for f in document["state_files"]
            ),
            folded={str(k): int(v) for k, v in document["folded"].items()},
        )


@dataclass(frozen=True)
class SnapshotResult:
    """What a run did (counts only)."""

    version: int | None
    as_of: datetime | None
    path: str | None  # the state file written, lake-relative (None when nothing new)
    full: bool
    consolidated: bool
    files_read: int
    files_skipped_by_lineage: int
    rows_read: int
    rows_written: int
    through_created_at: datetime | None


def _manifest_name(version: int) -> str:
    return f"{MANIFEST_DIR}/{version:010d}.json"


def read_manifest(lake: Lake) -> SnapshotManifest | None:
    """The current snapshot's manifest (the highest version), or None before the first snapshot."""
    entries = list_files(lake, MANIFEST_DIR, ".json")
    if not entries:
        return None
    return SnapshotManifest.from_json(read_bytes(lake, entries[-1].path))


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


def _batches(tables: Iterator[pa.Table]) -> Iterator[pa.RecordBatch]:
    for table in tables:
        yield from table.to_batches()


def _collect(tables: Iterator[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables([schema.empty_table(), *tables])


def _count_rows(lake: Lake, files: list[FileEntry]) -> int:
    total = 0
    for entry in files:
        with lake.fs.open_input_file(lake.path(entry.path)) as handle:
            total += pq.read_metadata(handle).num_rows
    return total


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a or b
    return max(a, b)


@rewrites_lake
def snapshot(
    lake: Lake,
    *,
    full: bool = False,
    allow_list: AllowList | None = None,
    consolidate_ratio: float = 0.5,
    max_deltas: int = 8,
    now: datetime | None = None,
) -> SnapshotResult:
    """Fold new change files into the current snapshot (or rebuild it from the whole log with `full`).

    Run one at a time per lake. A crash at any point leaves a valid snapshot: state files are written
    before the manifest that names them, and any state file is a valid fold.
    """
    allow = allow_list or default_allow_list()
    schema = state_schema(allow)
    ensure_layout(lake, allow)
    previous = None if full else read_manifest(lake)
    version = (previous.version if previous else 0) + 1
    if previous is None:  # a rebuild must not reuse a version number still named by old files
        latest = read_manifest(lake)
        version = (latest.version if latest else 0) + 1
    files = list_parquet(lake, CHANGES)
    folded: Mapping[str, int] = previous.folded if previous else {}
    to_read, covered = classify(lake, files, folded)
    state_files = list(previous.state_files) if previous else []
    through = previous.through_created_at if previous else None
    written_path: str | None = None
    rows_read = rows_written = 0
    if to_read or previous is None:
        paths = [f.path for f in to_read]
        rows_read = _count_rows(lake, to_read)
        through = _later(through, _max_created(lake, paths))
        kind = "base" if previous is None else "delta"
        written_path = f"{STATE_DIR}/{kind}-{version:010d}.parquet"
        folded_rows = fold(lake, [Source("changes", tuple(paths))], allow, live_only=False)
        rows_written = write_parquet_atomic(lake, written_path, _batches(folded_rows), schema)
        state_files = [*state_files, StateFile(written_path, rows_written, kind)]
    consolidated = False
    deltas = [f for f in state_files if f.kind == "delta"]
    base_rows = sum(f.rows for f in state_files if f.kind == "base")
    if deltas and (
        sum(f.rows for f in deltas) > consolidate_ratio * max(base_rows, 1) or len(deltas) > max_deltas
    ):
        written_path = f"{STATE_DIR}/base-{version:010d}.parquet"
        merged = fold(lake, [Source("state", tuple(f.path for f in state_files))], allow, live_only=False)
        rows = write_parquet_atomic(lake, written_path, _batches(merged), schema)
        state_files = [StateFile(written_path, rows, "base")]
        consolidated = True
    # The watermark: every file that exists now and was folded, read, or covered by its lineage.
    seen = {f.path for f in to_read} | {f.path for f in covered} | set(folded)
    manifest = SnapshotManifest(
        version=version,
        taken_at=now or datetime.now(UTC),
        through_created_at=through,
        state_files=tuple(state_files),
        folded={f.path: f.size for f in files if f.path in seen},
    )
    write_bytes_atomic(lake, _manifest_name(version), manifest.to_json())
    _collect_garbage(lake, manifest)
    logger.info(
        "snapshot written",
        extra={
            "version": version,
            "files_read": len(to_read),
            "files_covered": len(covered),
            "rows": rows_read,
        },
    )
    return SnapshotResult(
        version=version,
        as_of=None,
        path=written_path,
        full=previous is None,
        consolidated=consolidated,
        files_read=len(to_read),
        files_skipped_by_lineage=len(covered),
        rows_read=rows_read,
        rows_written=rows_written,
        through_created_at=through,
    )


def _collect_garbage(lake: Lake, manifest: SnapshotManifest) -> None:
    """Remove state files and manifests the new manifest no longer needs."""
    keep = {f.path for f in manifest.state_files}
    for entry in list_parquet(lake, STATE_DIR):
        if entry.path not in keep:
            delete_file(lake, entry.path)
    for entry in list_files(lake, MANIFEST_DIR, ".json"):
        if entry.path != _manifest_name(manifest.version):
            delete_file(lake, entry.path)


def read_snapshot(
    lake: Lake, *, include_deleted: bool = False, allow_list: AllowList | None = None
) -> pa.Table:
    """The current snapshot's state (live items only unless `include_deleted`); empty before the first."""
    allow = allow_list or default_allow_list()
    schema = state_schema(allow)
    manifest = read_manifest(lake)
    if manifest is None:
        return schema.empty_table()
    sources = [Source("state", tuple(f.path for f in manifest.state_files))]
    return _collect(fold(lake, sources, allow, live_only=not include_deleted), schema)


def _partition_day(path: str) -> date | None:
    for part in path.split("/"):
        if part.startswith(f"{PARTITION_COLUMN}="):
            try:
                return date.fromisoformat(part.split("=", 1)[1])
            except ValueError:
                return None
    return None


def _as_of_sources(lake: Lake, as_of: datetime) -> list[Source]:
    """What the state at `as_of` (stream creation time) folds.

    When the current snapshot folded nothing created after `as_of`, it is that snapshot plus the changes
    it has not folded that were created by then; otherwise the log from the start (only partitions up to
    the instant's date are read).
    """
    as_of = as_of.astimezone(UTC)
    where = f"WHERE created_at <= TIMESTAMPTZ '{as_of.isoformat()}'"
    manifest = read_manifest(lake)
    files = [
        f
        for f in list_parquet(lake, CHANGES)
        if (day := _partition_day(f.path)) is None or day <= as_of.date()
    ]
    if manifest and manifest.through_created_at and manifest.through_created_at <= as_of:
        to_read, _ = classify(lake, files, manifest.folded)
        return [
            Source("state", tuple(f.path for f in manifest.state_files)),
            Source("changes", tuple(f.path for f in to_read), where),
        ]
    return [Source("changes", tuple(f.path for f in files), where)]


def state_as_of(lake: Lake, as_of: datetime, *, allow_list: AllowList | None = None) -> pa.Table:
    """The table's live items as they stood at `as_of` (stream creation time, inclusive)."""
    allow = allow_list or default_allow_list()
    return _collect(fold(lake, _as_of_sources(lake, as_of), allow, live_only=True), state_schema(allow))


@rewrites_lake
def snapshot_as_of(lake: Lake, as_of: datetime, *, allow_list: AllowList | None = None) -> SnapshotResult:
    """Write the state at `as_of` to `snapshots/as_of/<instant>.parquet` (it does not change the
    current snapshot)."""
    allow = allow_list or default_allow_list()
    ensure_layout(lake, allow)
    as_of = as_of.astimezone(UTC)
    sources = _as_of_sources(lake, as_of)
    relative = f"{AS_OF_DIR}/{as_of.strftime('%Y%m%dT%H%M%S%fZ')}.parquet"
    folded_rows = fold(lake, sources, allow, live_only=True)
    rows = write_parquet_atomic(lake, relative, _batches(folded_rows), state_schema(allow))
    files_read = sum(len(s.files) for s in sources if s.kind == "changes")
    return SnapshotResult(
        version=None,
        as_of=as_of,
        path=relative,
        full=False,
        consolidated=False,
        files_read=files_read,
        files_skipped_by_lineage=0,
        rows_read=0,
        rows_written=rows,
        through_created_at=None,
    )

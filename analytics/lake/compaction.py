"""Compaction: merge a partition's small files into one, keeping exactly-once true.

Within each partition (`event_date=…`) of `changes` and `outcomes`, the files smaller than
`small_file_bytes` are read, deduplicated on the dataset's identity ((stream_arn, shard_id,
sequence_number) for changes, outcome_id for outcomes: of two final outcomes of one expiry, the one first
in `schema.outcomes.FINAL_OUTCOME_PRECEDENCE` is kept), sorted, and written as one file named by a
digest of its inputs (`compacted_<digest>.parquet`) whose Parquet metadata records its lineage. Only then
are the inputs deleted. A crash in between leaves the rows twice, which every reader dedupes; the next
compaction finishes the job (it deletes inputs that a compacted file already holds). Snapshots use the
lineage to skip a compacted file whose inputs they had already folded.

No column is lost: the merged schema is the union of the current schema and every input's.
"""

from __future__ import annotations

__all__ = ["CompactionResult", "compact"]

import json
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from analytics.lake._duck import arrow_table, connect
from analytics.lake._files import (
    COMPACTED_FROM_KEY,
    FileEntry,
    delete_file,
    digest,
    ensure_layout,
    list_parquet,
    read_file_metadata,
    read_table,
    write_parquet_atomic,
)
from analytics.lake._filesystem import Lake
from analytics.lake._fold import COMPACTED_PREFIX
from analytics.lake._rewrite_lock import rewrites_lake
from analytics.lake._schema import (
    CHANGE_IDENTITY,
    CHANGES,
    OUTCOME_IDENTITY,
    OUTCOMES,
    OUTCOMES_SCHEMA,
    AllowList,
    changes_schema,
    default_allow_list,
)
from schema.outcomes import FINAL_OUTCOME_PRECEDENCE

logger = logging.getLogger(__name__)

_ORDERS = {
    CHANGES: ("stream_arn", "shard_id", "sequence_key"),
    OUTCOMES: ("occurred_at", "outcome_id"),
}
_IDENTITIES = {CHANGES: CHANGE_IDENTITY, OUTCOMES: OUTCOME_IDENTITY}
# Of two rows with one identity, which is kept: for outcomes, a final outcome by its precedence (two
# final outcomes of one expiry share an id: schema.outcomes), as the `outcomes` view does.
_FINAL_RANK = "list_position([{}], kind) NULLS LAST".format(
    ", ".join(f"'{kind.value}'" for kind in FINAL_OUTCOME_PRECEDENCE)
)
_KEEP_FIRST = {CHANGES: (), OUTCOMES: (_FINAL_RANK,)}


@dataclass
class CompactionResult:
    """Counts per dataset (no personal data)."""

    files_merged: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    files_written: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    duplicates_dropped: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    leftovers_removed: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def _lineage(lake: Lake, entry: FileEntry) -> list[Any] | None:
    if not entry.name.startswith(COMPACTED_PREFIX):
        return None
    raw = read_file_metadata(lake, entry.path).get(COMPACTED_FROM_KEY)
    return json.loads(raw) if raw else None


def _finish_interrupted(lake: Lake, files: list[FileEntry]) -> tuple[list[FileEntry], int]:
    """Delete inputs that a compacted file already holds (left by a crash after its write)."""
    present = {f.path for f in files}
    removed: set[str] = set()
    for entry in files:
        if entry.path in removed:
            continue
        for node in _lineage(lake, entry) or []:
            if node["path"] in present and node["path"] not in removed and node["path"] != entry.path:
                delete_file(lake, node["path"])
                removed.add(node["path"])
    return [f for f in files if f.path not in removed], len(removed)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    columns = [
        table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _merge(lake: Lake, dataset: str, inputs: list[FileEntry], schema: pa.Schema) -> tuple[pa.Table, int]:
    tables = [read_table(lake, entry.path) for entry in inputs]
    unified = pa.unify_schemas(
        [schema, *(t.schema for t in tables)], promote_options="permissive"
    ).with_metadata(schema.metadata)
    combined = pa.concat_tables([_conform(t, unified) for t in tables])
    identity = ", ".join(_IDENTITIES[dataset])
    order = ", ".join(_ORDERS[dataset])
    keep = ", ".join((*_KEEP_FIRST[dataset], *_ORDERS[dataset]))
    con = connect(lake)
    try:
        con.register("merge_input", combined)
        merged = arrow_table(
            con,
            f"SELECT * FROM merge_input QUALIFY row_number() OVER (PARTITION BY {identity} "  # noqa: S608
            f"ORDER BY {keep}) = 1 ORDER BY {order}",
        )
    finally:
        con.close()
    return _conform(merged, unified), combined.num_rows - merged.num_rows


def _compact_partition(
    lake: Lake,
    dataset: str,
    *,
    files: list[FileEntry],
    schema: pa.Schema,
    small_file_bytes: int,
    min_files: int,
    result: CompactionResult,
) -> None:
    files, removed = _finish_interrupted(lake, files)
    result.leftovers_removed[dataset] += removed
    small = [f for f in files if f.size < small_file_bytes]
    if len(small) < min_files:
        return
    try:
        lineage = [{"path": f.path, **({"from": sub} if (sub := _lineage(lake, f)) else {})} for f in small]
        merged, dropped = _merge(lake, dataset, small, schema)
    except FileNotFoundError:
        logger.info("compaction skipped a partition whose files changed meanwhile")
        return
    directory = small[0].directory
    name = f"{COMPACTED_PREFIX}{digest('|'.join(f.path for f in small), 32)}.parquet"
    metadata = {COMPACTED_FROM_KEY: json.dumps(lineage, separators=(",", ":")).encode()}
    write_parquet_atomic(lake, f"{directory}/{name}", merged, merged.schema, metadata=metadata)
    for entry in small:
        if entry.name != name:
            delete_file(lake, entry.path)
    result.files_merged[dataset] += len(small)
    result.files_written[dataset] += 1
    result.duplicates_dropped[dataset] += dropped


@rewrites_lake
def compact(
    lake: Lake,
    *,
    datasets: Iterable[str] = (CHANGES, OUTCOMES),
    small_file_bytes: int = 32 * 1024 * 1024,
    min_files: int = 2,
    allow_list: AllowList | None = None,
) -> CompactionResult:
    """Merge each partition's small files. Safe to run while landing goes on (it only touches the files
    it listed); it holds the lake's rewrite lock, so purges, snapshots and other compactions wait."""
    allow = allow_list or default_allow_list()
    ensure_layout(lake, allow)
    schemas = {CHANGES: changes_schema(allow), OUTCOMES: OUTCOMES_SCHEMA}
    result = CompactionResult()
    for dataset in datasets:
        by_partition: dict[str, list[FileEntry]] = defaultdict(list)
        for entry in list_parquet(lake, dataset):
            by_partition[entry.directory].append(entry)
        for files in by_partition.values():
            _compact_partition(
                lake,
                dataset,
                files=files,
                schema=schemas[dataset],
                small_file_bytes=small_file_bytes,
                min_files=min_files,
                result=result,
            )
    logger.info("compaction done", extra={"files_merged": sum(result.files_merged.values())})
    return result

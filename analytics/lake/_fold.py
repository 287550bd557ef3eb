"""How change rows fold into item state: the SQL the views use and the two-pass fold of snapshots."""

from __future__ import annotations

__all__ = ["STATE_ORDER", "Source", "conform", "fold", "fold_sql", "read_table"]

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analytics.lake._duck import arrow_table, connect, path_list
from analytics.lake._filesystem import Lake
from analytics.lake._schema import AllowList, changes_schema, image_columns, state_schema

# Latest first: the change with the highest sequence key wins (duplicates of one event are identical).
STATE_ORDER = "sequence_key DESC, stream_arn DESC, shard_id DESC"


def fold_sql(source: str, allow: AllowList, where: str = "") -> str:
    """Latest image per item among change rows, tombstones included, in state-schema order."""
    image = ", ".join(
        f"CASE WHEN has_new_image THEN new_{f.name} ELSE old_{f.name} END AS {f.name}"
        for f in image_columns(allow)
    )
    return (
        f"SELECT pk, sk, item_kind, user_id, {image}, change_kind = 'REMOVE' AS deleted, "  # noqa: S608
        "created_at AS changed_at, stream_arn, shard_id, sequence_number, sequence_key, event_id, "
        f"event_type, change_kind FROM {source} {where} "
        f"QUALIFY row_number() OVER (PARTITION BY pk, sk ORDER BY {STATE_ORDER}) = 1"
    )


def read_table(lake: Lake, relative: str) -> pa.Table:
    """A data file of the lake (lake-relative path), whole."""
    with lake.fs.open_input_file(lake.path(relative)) as handle:
        table = pq.read_table(handle)
    # Files delta-rs rewrote (OPTIMIZE, DELETE) store Arrow's view types: read them as plain strings.
    if any(pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type) for f in table.schema):
        fields = [
            f.with_type(pa.string())
            if pa.types.is_string_view(f.type)
            else f.with_type(pa.binary())
            if pa.types.is_binary_view(f.type)
            else f
            for f in table.schema
        ]
        table = table.cast(pa.schema(fields, metadata=table.schema.metadata))
    return table


@dataclass(frozen=True)
class Source:
    """Files to fold (lake-relative): `changes` data files (`kind` "changes") or state files ("state"),
    with an optional SQL filter on their rows (e.g. on created_at for an as-of state)."""

    kind: str
    files: tuple[str, ...]
    where: str = ""


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with exactly `schema`'s columns: missing ones (older files) as nulls, extra ones dropped."""
    columns = [
        table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _as_state(changes: pa.Table, allow: AllowList, schema: pa.Schema) -> pa.Table:
    """Change rows as state rows: the new image (the old one for a removal), tombstone for a REMOVE."""
    has_new = changes["has_new_image"]
    columns: dict[str, Any] = {
        "pk": changes["pk"],
        "sk": changes["sk"],
        "item_kind": changes["item_kind"],
        "user_id": changes["user_id"],
    }
    for f in image_columns(allow):
        columns[f.name] = pc.if_else(has_new, changes[f"new_{f.name}"], changes[f"old_{f.name}"])
    columns["deleted"] = pc.equal(changes["change_kind"], "REMOVE")
    columns["changed_at"] = changes["created_at"]
    for name in ("stream_arn", "shard_id", "sequence_number", "sequence_key", "event_id", "event_type"):
        columns[name] = changes[name]
    columns["change_kind"] = changes["change_kind"]
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)


def fold(lake: Lake, sources: list[Source], allow: AllowList, *, live_only: bool) -> Iterator[pa.Table]:
    """The latest row per item (pk, sk) across every source, as state rows (tombstones dropped when
    `live_only`), file by file.

    Two passes instead of one wide sort: DuckDB finds each item's winning row from three narrow columns
    (an `arg_max` of the row's address by sequence key), then pyarrow reads each file once and takes its
    winning rows. Duplicates of one event are identical, so whichever copy wins is the same row.
    """
    parts = [
        f"SELECT pk, sk, sequence_key, {index} AS s, file_index AS f, file_row_number AS r "  # noqa: S608
        f"FROM read_parquet({path_list(lake, source.files)}, union_by_name = true, "
        f"hive_partitioning = false) {source.where}"
        for index, source in enumerate(sources)
        if source.files
    ]
    if not parts:
        return
    union = " UNION ALL ".join(parts)
    sql = (
        "SELECT w.s AS s, w.f AS f, w.r AS r FROM ("  # noqa: S608
        f"SELECT arg_max({{'s': s, 'f': f, 'r': r}}, sequence_key) AS w FROM ({union}) GROUP BY pk, sk)"
    )
    con = connect(lake)
    try:
        found = arrow_table(con, sql)
    finally:
        con.close()
    if not found.num_rows:
        return
    source_ids = found["s"].to_numpy().astype(np.int64)
    file_ids = found["f"].to_numpy().astype(np.int64)
    rows = found["r"].to_numpy().astype(np.int64)
    order = np.lexsort((rows, file_ids, source_ids))
    source_ids, file_ids, rows = source_ids[order], file_ids[order], rows[order]
    starts = np.flatnonzero(np.diff(source_ids * (1 << 32) + file_ids)) + 1
    target = state_schema(allow)
    for group in np.split(np.arange(len(rows)), starts):
        source = sources[int(source_ids[group[0]])]
        relative = source.files[int(file_ids[group[0]])]
        taken = read_table(lake, relative).take(pa.array(rows[group]))
        if source.kind == "changes":
            table = _as_state(conform(taken, changes_schema(allow)), allow, target)
        else:
            table = conform(taken, target)
        if live_only:
            table = table.filter(pc.invert(table["deleted"]))
        yield table

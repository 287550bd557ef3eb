"""Purge: delete every row of given users from every dataset (for the erasure feature).

One call takes a batch of user ids and rewrites each affected file once, whole and atomically under
its own name (so snapshot manifests and compaction lineage stay valid). A row belongs to a user when
its `user_id` is one of the ids, or (change log and snapshots) its partition key is `USER#<id>`.
Files are read column-first: a file none of whose rows match is not rewritten.

Views can hide erased users before their rows are purged: see `analytics.views` (`erased_users`).
A consumer replaying the stream after a purge can land the user's events again: an erasure must purge
after the stream's retention has passed it, or mask and purge again.
"""

from __future__ import annotations

__all__ = ["PURGED_DATASETS", "PurgeCounts", "purge_users"]

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from analytics.lake._files import list_parquet, read_schema, read_table, write_parquet_atomic
from analytics.lake._filesystem import Lake
from analytics.lake._rewrite_lock import rewrites_lake
from analytics.lake._schema import CHANGES, OUTCOMES, STATE_DIR
from analytics.lake.snapshot import AS_OF_DIR
from schema.table import USER_PK_PREFIX

logger = logging.getLogger(__name__)

PURGED_DATASETS: tuple[str, ...] = (CHANGES, OUTCOMES, STATE_DIR, AS_OF_DIR)


@dataclass(frozen=True)
class PurgeCounts:
    """Rows deleted and files rewritten, per dataset directory."""

    rows: Mapping[str, int]
    files_rewritten: Mapping[str, int]

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def _matches(table: pa.Table, user_ids: pa.Array, pks: pa.Array) -> pa.ChunkedArray | pa.Array:
    mask: pa.ChunkedArray | pa.Array = pa.array([False] * table.num_rows, pa.bool_())
    if "user_id" in table.column_names:
        mask = pc.or_(mask, pc.fill_null(pc.is_in(table["user_id"], value_set=user_ids), False))
    if "pk" in table.column_names:
        mask = pc.or_(mask, pc.fill_null(pc.is_in(table["pk"], value_set=pks), False))
    return mask


@rewrites_lake
def purge_users(lake: Lake, user_ids: Iterable[str]) -> PurgeCounts:
    """Delete every row of `user_ids` from the change log, outcomes, snapshot state and as-of files."""
    ids = sorted(set(user_ids))
    rows: dict[str, int] = dict.fromkeys(PURGED_DATASETS, 0)
    files: dict[str, int] = dict.fromkeys(PURGED_DATASETS, 0)
    if not ids:
        return PurgeCounts(rows, files)
    id_array = pa.array(ids, pa.string())
    pk_array = pa.array([f"{USER_PK_PREFIX}{user_id}" for user_id in ids], pa.string())
    for dataset in PURGED_DATASETS:
        for entry in list_parquet(lake, dataset):
            names = set(read_schema(lake, entry.path).names)
            probe_columns = [c for c in ("user_id", "pk") if c in names]
            if not probe_columns:
                continue
            probe = read_table(lake, entry.path, columns=probe_columns)
            mask = _matches(probe, id_array, pk_array)
            hits = pc.sum(mask).as_py() or 0
            if not hits:
                continue
            whole = read_table(lake, entry.path)
            kept = whole.filter(pc.invert(mask))
            write_parquet_atomic(lake, entry.path, kept, whole.schema)
            rows[dataset] += hits
            files[dataset] += 1
    logger.info("purge done", extra={"rows": sum(rows.values()), "files": sum(files.values())})
    return PurgeCounts(rows, files)

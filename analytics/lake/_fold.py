"""SQL and file bookkeeping shared by snapshots, views and compaction: how change rows fold into item
state, and which change files a snapshot has not folded yet."""

from __future__ import annotations

__all__ = ["COMPACTED_PREFIX", "STATE_ORDER", "classify", "covered", "fold_sql", "merge_sql"]

import json
from collections.abc import Mapping
from typing import Any

from analytics.lake._files import COMPACTED_FROM_KEY, FileEntry, read_file_metadata
from analytics.lake._filesystem import Lake
from analytics.lake._schema import AllowList, image_columns, state_schema

COMPACTED_PREFIX = "compacted_"
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


def merge_sql(source: str, allow: AllowList, *, live_only: bool) -> str:
    columns = ", ".join(state_schema(allow).names)
    live = "WHERE NOT deleted" if live_only else ""
    return (
        f"SELECT {columns} FROM (SELECT * FROM {source} "  # noqa: S608
        f"QUALIFY row_number() OVER (PARTITION BY pk, sk ORDER BY {STATE_ORDER}) = 1) {live}"
    )


def covered(lineage: list[Any], folded: Mapping[str, int]) -> bool:
    """Whether every file in a compacted file's lineage has been folded (directly or via its inputs)."""
    for node in lineage:
        if node["path"] in folded:
            continue
        children = node.get("from")
        if not children or not covered(children, folded):
            return False
    return True


def classify(
    lake: Lake, files: list[FileEntry], folded: Mapping[str, int]
) -> tuple[list[FileEntry], list[FileEntry]]:
    """Split files the manifest has not seen into (to read, already covered by lineage)."""
    to_read: list[FileEntry] = []
    skipped: list[FileEntry] = []
    for entry in files:
        if entry.path in folded:
            continue
        if entry.name.startswith(COMPACTED_PREFIX):
            try:
                raw = read_file_metadata(lake, entry.path).get(COMPACTED_FROM_KEY)
            except FileNotFoundError:
                continue  # replaced meanwhile: its successor is seen next time
            if raw and covered(json.loads(raw), folded):
                skipped.append(entry)
                continue
        to_read.append(entry)
    return to_read, skipped

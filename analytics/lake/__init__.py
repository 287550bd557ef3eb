"""The lake: Delta tables (delta-rs) written by the landing (a record-processor handler and outcome sink),
compacted, snapshotted and purged to the last byte. Tables and their columns: schema/lake.md.

The names are loaded on first use (`schema.faces.lazy_names`, as `analytics` and `pipeline` do): a KCL
child takes the landing handler and its writer's client and loads neither the committer's planner nor
the compaction, snapshot and purge modules (DuckDB, pandas through pyarrow.dataset), which would
double its start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schema.faces import lazy_names

if TYPE_CHECKING:
    from analytics.lake._errors import LakeMissing, LakeUnreachable, NoDataAsOf, QueryFailed, QueryRefused
    from analytics.lake._filesystem import Lake, lake_from_settings, open_lake
    from analytics.lake._history_start import (
        HISTORY_START,
        HistoryStartsLater,
        history_start,
        record_history_start,
    )
    from analytics.lake._read import first_change_at, require_as_of, require_data, require_reachable
    from analytics.lake._schema import (
        CHANGE_IDENTITY,
        CHANGES,
        OUTCOME_IDENTITY,
        OUTCOMES,
        OUTCOMES_SCHEMA,
        AllowList,
        AllowListError,
        changes_schema,
        default_allow_list,
        load_allow_list,
        state_schema,
    )
    from analytics.lake.compaction import CompactionResult, compact, compact_continuously
    from analytics.lake.landing import LakeHandler, LandingStats
    from analytics.lake.purge import PurgeCounts, purge_users
    from analytics.lake.snapshots import (
        SnapshotInfo,
        SnapshotResult,
        read_snapshot,
        snapshot,
        snapshot_as_of,
        snapshot_info,
        state_as_of,
        state_at_version,
    )

__all__ = [
    "CHANGES",
    "CHANGE_IDENTITY",
    "HISTORY_START",
    "OUTCOMES",
    "OUTCOMES_SCHEMA",
    "OUTCOME_IDENTITY",
    "AllowList",
    "AllowListError",
    "CompactionResult",
    "HistoryStartsLater",
    "Lake",
    "LakeHandler",
    "LakeMissing",
    "LakeUnreachable",
    "LandingStats",
    "NoDataAsOf",
    "PurgeCounts",
    "QueryFailed",
    "QueryRefused",
    "SnapshotInfo",
    "SnapshotResult",
    "changes_schema",
    "compact",
    "compact_continuously",
    "default_allow_list",
    "first_change_at",
    "history_start",
    "lake_from_settings",
    "load_allow_list",
    "open_lake",
    "purge_users",
    "read_snapshot",
    "record_history_start",
    "require_as_of",
    "require_data",
    "require_reachable",
    "snapshot",
    "snapshot_as_of",
    "snapshot_info",
    "state_as_of",
    "state_at_version",
    "state_schema",
]

_HOME = {
    "AllowList": "analytics.lake._schema",
    "AllowListError": "analytics.lake._schema",
    "CHANGES": "analytics.lake._schema",
    "CHANGE_IDENTITY": "analytics.lake._schema",
    "CompactionResult": "analytics.lake.compaction",
    "HISTORY_START": "analytics.lake._history_start",
    "HistoryStartsLater": "analytics.lake._history_start",
    "Lake": "analytics.lake._filesystem",
    "LakeHandler": "analytics.lake.landing",
    "LakeMissing": "analytics.lake._errors",
    "LakeUnreachable": "analytics.lake._errors",
    "LandingStats": "analytics.lake.landing",
    "NoDataAsOf": "analytics.lake._errors",
    "OUTCOMES": "analytics.lake._schema",
    "OUTCOMES_SCHEMA": "analytics.lake._schema",
    "OUTCOME_IDENTITY": "analytics.lake._schema",
    "PurgeCounts": "analytics.lake.purge",
    "QueryFailed": "analytics.lake._errors",
    "QueryRefused": "analytics.lake._errors",
    "SnapshotInfo": "analytics.lake.snapshots",
    "SnapshotResult": "analytics.lake.snapshots",
    "changes_schema": "analytics.lake._schema",
    "compact": "analytics.lake.compaction",
    "compact_continuously": "analytics.lake.compaction",
    "default_allow_list": "analytics.lake._schema",
    "first_change_at": "analytics.lake._read",
    "history_start": "analytics.lake._history_start",
    "lake_from_settings": "analytics.lake._filesystem",
    "load_allow_list": "analytics.lake._schema",
    "open_lake": "analytics.lake._filesystem",
    "purge_users": "analytics.lake.purge",
    "read_snapshot": "analytics.lake.snapshots",
    "record_history_start": "analytics.lake._history_start",
    "require_as_of": "analytics.lake._read",
    "require_data": "analytics.lake._read",
    "require_reachable": "analytics.lake._read",
    "snapshot": "analytics.lake.snapshots",
    "snapshot_as_of": "analytics.lake.snapshots",
    "snapshot_info": "analytics.lake.snapshots",
    "state_as_of": "analytics.lake.snapshots",
    "state_at_version": "analytics.lake.snapshots",
    "state_schema": "analytics.lake._schema",
}

__getattr__ = lazy_names(__name__, _HOME)

"""The lake: Delta tables (delta-rs) written by the landing (a record-processor handler and outcome sink),
compacted, snapshotted and purged to the last byte. Tables and their columns: schema/lake.md."""

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
from analytics.lake.snapshot import (
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

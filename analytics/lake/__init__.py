"""The Parquet lake: landing (a record-processor handler and outcome sink), compaction, snapshots and
purges. Datasets and their columns are documented in schema/lake.md."""

from analytics.lake._filesystem import Lake, lake_from_settings, open_lake
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
from analytics.lake.compaction import CompactionResult, compact
from analytics.lake.landing import LakeHandler, LandingStats
from analytics.lake.purge import PurgeCounts, purge_users
from analytics.lake.snapshot import (
    SnapshotManifest,
    SnapshotResult,
    read_manifest,
    read_snapshot,
    snapshot,
    snapshot_as_of,
    state_as_of,
)

__all__ = [
    "CHANGES",
    "CHANGE_IDENTITY",
    "OUTCOMES",
    "OUTCOMES_SCHEMA",
    "OUTCOME_IDENTITY",
    "AllowList",
    "AllowListError",
    "CompactionResult",
    "Lake",
    "LakeHandler",
    "LandingStats",
    "PurgeCounts",
    "SnapshotManifest",
    "SnapshotResult",
    "changes_schema",
    "compact",
    "default_allow_list",
    "lake_from_settings",
    "load_allow_list",
    "open_lake",
    "purge_users",
    "read_manifest",
    "read_snapshot",
    "snapshot",
    "snapshot_as_of",
    "state_as_of",
    "state_schema",
]

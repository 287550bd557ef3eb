"""Analytics over the entitlements table's change stream: the Parquet lake and its DuckDB views."""

from analytics.lake import (
    Lake,
    LakeHandler,
    compact,
    lake_from_settings,
    open_lake,
    purge_users,
    read_snapshot,
    snapshot,
    snapshot_as_of,
    state_as_of,
)
from analytics.views import VIEW_NAMES, connect, create_views, set_mask

__all__ = [
    "VIEW_NAMES",
    "Lake",
    "LakeHandler",
    "compact",
    "connect",
    "create_views",
    "lake_from_settings",
    "open_lake",
    "purge_users",
    "read_snapshot",
    "set_mask",
    "snapshot",
    "snapshot_as_of",
    "state_as_of",
]

"""Analytics over the entitlements table's change stream: the Delta lake and its DuckDB views.

`connect(lake)` opens the views, hiding every user an erasure has masked in the lake (always). Reads never
create a lake: one with no data raises `LakeMissing`, an as-of before its first change `NoDataAsOf`.

The names are loaded on first use (as `pipeline`'s face does): importing a light module under
`analytics` (the SQL folder, a report format for a command's options) does not load delta-rs, DuckDB
or pyarrow, so `entitlements <command> --help` stays quick.
"""

from __future__ import annotations

__all__ = [
    "AnalyticsLakeEraser",
    "Lake",
    "LakeDeletedAccounts",
    "LakeHandler",
    "LakeMissing",
    "MaintenancePolicy",
    "MaintenanceRunner",
    "NoDataAsOf",
    "WorkerWriter",
    "WorkerWriterClient",
    "connect",
    "lake_from_settings",
    "open_lake",
    "snapshot",
    "stable_owner",
]

from typing import TYPE_CHECKING

from schema.faces import lazy_names

if TYPE_CHECKING:
    from analytics.lake import Lake, LakeHandler, LakeMissing, NoDataAsOf, lake_from_settings, open_lake
    from analytics.lake.deleted_accounts import LakeDeletedAccounts
    from analytics.lake.eraser import AnalyticsLakeEraser
    from analytics.lake.maintenance import MaintenancePolicy, MaintenanceRunner, stable_owner
    from analytics.lake.snapshots import snapshot
    from analytics.lake.views import connect
    from analytics.lake.worker_writer import WorkerWriter, WorkerWriterClient

_HOME = {
    "AnalyticsLakeEraser": "analytics.lake.eraser",
    "Lake": "analytics.lake",
    "LakeDeletedAccounts": "analytics.lake.deleted_accounts",
    "LakeHandler": "analytics.lake",
    "LakeMissing": "analytics.lake",
    "MaintenancePolicy": "analytics.lake.maintenance",
    "MaintenanceRunner": "analytics.lake.maintenance",
    "NoDataAsOf": "analytics.lake",
    "WorkerWriter": "analytics.lake.worker_writer",
    "WorkerWriterClient": "analytics.lake.worker_writer",
    "connect": "analytics.lake.views",
    "lake_from_settings": "analytics.lake",
    "open_lake": "analytics.lake",
    "snapshot": "analytics.lake.snapshots",
    "stable_owner": "analytics.lake.maintenance",
}


__getattr__ = lazy_names(__name__, _HOME)

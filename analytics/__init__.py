"""Analytics over the entitlements table's change stream: the Delta lake and its DuckDB views.

`connect(lake)` opens the views, hiding every user an erasure has masked in the lake (always). Reads never
create a lake: one with no data raises `LakeMissing`, an as-of before its first change `NoDataAsOf`.
"""

from analytics.deleted_accounts import LakeDeletedAccounts
from analytics.erasure import AnalyticsLakeEraser
from analytics.lake import Lake, LakeHandler, LakeMissing, NoDataAsOf, lake_from_settings, open_lake, snapshot
from analytics.views import connect

__all__ = [
    "AnalyticsLakeEraser",
    "Lake",
    "LakeDeletedAccounts",
    "LakeHandler",
    "LakeMissing",
    "NoDataAsOf",
    "connect",
    "lake_from_settings",
    "open_lake",
    "snapshot",
]

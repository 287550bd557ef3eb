"""The lake: Delta tables (delta-rs) written by the landing (a record-processor handler and outcome sink),
compacted, snapshotted and purged to the last byte. Tables and their columns: schema/lake.md.

The face is the 13 names other packages take from the lake (tests/test_faces.py holds it to them): the
lake and how it is opened, the landing handler with the allow list and `changes` schema it is built from,
and what every read checks first. A job one or two callers use is a public module with its own `__all__`
(`snapshots`, `compaction`, `purge`, `history_start`, `views`, `eraser`, `maintenance`, ...), and the
`_private` modules are the lake's own (and its tests').

The names are loaded on first use (`schema.faces.lazy_names`, as `analytics` and `pipeline` do): a KCL
child takes the landing handler and its writer's client and loads neither the committer's planner nor
the compaction, snapshot and purge modules (DuckDB, pandas through pyarrow.dataset), which would
double its start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schema.faces import lazy_names

if TYPE_CHECKING:
    from analytics.lake._errors import LakeMissing, NoDataAsOf
    from analytics.lake._filesystem import Lake, lake_from_settings, open_lake
    from analytics.lake._read import require_as_of, require_data, require_reachable
    from analytics.lake._schema import CHANGES, AllowList, changes_schema, default_allow_list
    from analytics.lake.landing import LakeHandler

__all__ = [
    "CHANGES",
    "AllowList",
    "Lake",
    "LakeHandler",
    "LakeMissing",
    "NoDataAsOf",
    "changes_schema",
    "default_allow_list",
    "lake_from_settings",
    "open_lake",
    "require_as_of",
    "require_data",
    "require_reachable",
]

_HOME = {
    "AllowList": "analytics.lake._schema",
    "CHANGES": "analytics.lake._schema",
    "Lake": "analytics.lake._filesystem",
    "LakeHandler": "analytics.lake.landing",
    "LakeMissing": "analytics.lake._errors",
    "NoDataAsOf": "analytics.lake._errors",
    "changes_schema": "analytics.lake._schema",
    "default_allow_list": "analytics.lake._schema",
    "lake_from_settings": "analytics.lake._filesystem",
    "open_lake": "analytics.lake._filesystem",
    "require_as_of": "analytics.lake._read",
    "require_data": "analytics.lake._read",
    "require_reachable": "analytics.lake._read",
}

__getattr__ = lazy_names(__name__, _HOME)

"""analytics/lake/_files.py and _delta.py: owner-only local tables, schema anchors outside the lake."""

from __future__ import annotations

import os

import pyarrow.parquet as pq

from analytics.lake import CHANGES, Lake, LakeHandler, default_allow_list
from analytics.lake._files import TABLES, anchor_file, write_bytes_atomic
from tests.analytics.lakesim import TableSim


def test_every_file_and_folder_of_a_local_lake_is_owner_only(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake)
    for event in history.events[:50]:
        handler.add(event)
    handler.flush()
    modes = set()
    for folder, _, names in os.walk(lake.base):
        modes.add(("dir", os.stat(folder).st_mode & 0o777))
        modes |= {("file", os.stat(os.path.join(folder, n)).st_mode & 0o777) for n in names}
    assert modes == {("dir", 0o700), ("file", 0o600)}


def test_the_schema_anchor_is_a_zero_row_file_outside_the_lake(lake: Lake) -> None:
    path = anchor_file(TABLES[CHANGES], default_allow_list())
    assert not path.startswith(lake.base)
    assert pq.read_metadata(path).num_rows == 0
    assert "/event_date=1970-01-01/" in path


def test_a_small_local_file_is_owner_only(lake: Lake) -> None:
    write_bytes_atomic(lake, "_erasure/mask.json", b"{}")
    assert os.stat(lake.path("_erasure/mask.json")).st_mode & 0o777 == 0o600

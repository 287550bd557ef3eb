"""analytics/erasure.py: the lake side of an erasure (mask, purge, holdings), and the mask every reader
applies by itself."""

from __future__ import annotations

import os
from functools import partial

from analytics import AnalyticsLakeEraser, connect
from analytics.audits import load_config
from analytics.audits._connection import open_connection
from analytics.lake import Lake
from analytics.lake._mask import MASK_PATH
from tests.analytics.lake.delta_files import data_files
from tests.analytics.lakesim import TableSim, land

_land = partial(land, flush_rows=30)


def _count(con: object, user_id: str) -> int:
    return int(con.execute("SELECT count(*) FROM changes WHERE user_id = ?", [user_id]).fetchone()[0])  # type: ignore[attr-defined]


def test_a_masked_user_is_hidden_by_a_connection_that_names_no_mask(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    AnalyticsLakeEraser(lake).mask(["u001"])
    assert _count(connect(lake), "u001") == 0


def test_a_masked_user_is_hidden_from_the_audits_connection(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    AnalyticsLakeEraser(lake).mask(["u001"])
    con, _ = open_connection(lake, load_config(), from_snapshot=False)
    assert _count(con, "u001") == 0


def test_a_user_unmasked_is_shown_again(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    eraser = AnalyticsLakeEraser(lake)
    eraser.mask(["u001", "u002"])
    eraser.unmask(["u001"])
    assert (eraser.masked_users(), _count(connect(lake), "u001") > 0) == (frozenset({"u002"}), True)


def test_the_mask_of_a_local_lake_is_owner_only(lake: Lake) -> None:
    AnalyticsLakeEraser(lake).mask(["u001"])
    assert os.stat(lake.path(MASK_PATH)).st_mode & 0o777 == 0o600


def test_the_mask_is_not_a_data_file_of_any_dataset(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    AnalyticsLakeEraser(lake).mask(["u001"])
    assert not [path for path in data_files(lake, "changes") if "_erasure" in path]


def test_a_purge_removes_the_rows_and_holds_then_answers_no(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    eraser = AnalyticsLakeEraser(lake)
    before = eraser.holds("u001")
    removed = eraser.purge(["u001"])
    assert (before, removed > 0, eraser.holds("u001")) == (True, True, False)


def test_holds_answers_none_when_a_data_file_cannot_be_read(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    with open(lake.path(data_files(lake, "changes")[0]), "wb") as damaged:
        damaged.write(b"not parquet")
    assert AnalyticsLakeEraser(lake).holds("u001") is None

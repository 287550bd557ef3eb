"""analytics/erasure.py: the lake side of an erasure (mask, purge, holdings), and the mask every reader
applies by itself."""

from __future__ import annotations

import os
from functools import partial

import pyarrow.fs as pafs
import pytest

from analytics import AnalyticsLakeEraser, connect
from analytics.audits import load_config
from analytics.audits._connection import open_connection
from analytics.lake import Lake, _traces, snapshot
from analytics.lake._delta import delete_rows
from analytics.lake._mask import MASK_PATH
from analytics.lake._traces import scan_table
from analytics.lake.purge import PURGED_DATASETS
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


def test_holds_answers_yes_for_a_user_named_only_by_the_log(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    delete_rows(lake, "changes", "user_id = 'u001' OR pk = 'USER#u001'")  # no vacuum, no log clean-up
    for name in ("outcomes", "snapshots/state", "snapshots/as_of"):
        delete_rows(lake, name, "user_id = 'u001'")
    held = scan_table(lake, "changes", "u001").files_holding
    assert AnalyticsLakeEraser(lake).holds("u001") is True
    assert any("_delta_log" in path for path in held)


def test_holds_answers_no_for_a_short_id_nobody_has(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    snapshot(lake)
    assert AnalyticsLakeEraser(lake).holds("1") is False


def test_traces_counts_per_table_the_files_read_and_those_holding_the_user(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    eraser = AnalyticsLakeEraser(lake)
    before = eraser.traces("u001")
    eraser.purge(["u001"])
    after = eraser.traces("u001")
    changes_before, changes_after = before["changes"], after["changes"]
    assert changes_before is not None and changes_after is not None
    assert changes_before.traces > 0 and changes_before.files_scanned >= changes_before.traces
    assert {name: t.traces if t else None for name, t in after.items()} == dict.fromkeys(PURGED_DATASETS, 0)
    assert changes_after.files_scanned > 0


def test_traces_answers_none_for_a_table_a_file_of_which_cannot_be_read(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    with open(lake.path(data_files(lake, "changes")[0]), "wb") as damaged:
        damaged.write(b"not parquet")
    traces = AnalyticsLakeEraser(lake).traces("u001")
    assert (traces["changes"], traces["outcomes"] is not None) == (None, True)


def test_holds_skips_a_file_deleted_between_the_listing_and_its_reading(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    _land(lake, history)
    eraser = AnalyticsLakeEraser(lake)
    eraser.purge(["u001"])
    listed = _traces.table_files

    def with_a_vanished_file(lake: Lake, name: str) -> list[pafs.FileInfo]:
        gone = pafs.FileInfo(lake.path(f"{name}/part-00000-vanished-c000.zstd.parquet"), pafs.FileType.File)
        return [*listed(lake, name), gone]

    monkeypatch.setattr(_traces, "table_files", with_a_vanished_file)
    assert eraser.holds("u001") is False

"""analytics/lake/eraser.py: the lake side of an erasure (mask, purge, holdings), and the mask every reader
applies by itself."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from functools import partial

import pyarrow.fs as pafs
import pytest

from analytics import AnalyticsLakeEraser, connect
from analytics.audits import load_config
from analytics.audits._connection import open_connection
from analytics.lake import Lake, _traces
from analytics.lake._delta import delete_rows
from analytics.lake._mask import MASK_PATH
from analytics.lake._traces import scan_table, scan_table_for
from analytics.lake.purge import PURGED_DATASETS, PurgeCounts, purge_users
from analytics.lake.snapshots import snapshot
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
    assert (before, removed["u001"]["changes"] > 0, eraser.holds("u001")) == (True, True, False)


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
    before = eraser.traces_for(["u001"])
    eraser.purge(["u001"])
    after = eraser.traces_for(["u001"])
    changes_before, changes_after = before["changes"], after["changes"]
    assert changes_before is not None and changes_after is not None
    held = changes_before.traces_of("u001")
    assert held > 0 and changes_before.files_scanned >= held
    assert {name: t.traces_of("u001") if t else None for name, t in after.items()} == dict.fromkeys(
        PURGED_DATASETS, 0
    )
    assert changes_after.files_scanned > 0


def test_traces_answers_none_for_a_table_a_file_of_which_cannot_be_read(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    with open(lake.path(data_files(lake, "changes")[0]), "wb") as damaged:
        damaged.write(b"not parquet")
    traces = AnalyticsLakeEraser(lake).traces_for(["u001"])
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


def test_one_batch_scan_tells_each_users_traces_apart(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    eraser = AnalyticsLakeEraser(lake)
    eraser.purge(["u002"])
    found = eraser.traces_for(["u001", "u002", "nobody"])
    changes = found["changes"]
    assert changes is not None
    alone = scan_table(lake, "changes", "u001")
    assert (changes.traces_of("u001"), changes.files_scanned) == (alone.traces, alone.files_scanned)
    assert (changes.traces_of("u001") > 0, changes.traces_of("u002"), changes.traces_of("nobody")) == (
        True,
        0,
        0,
    )


def test_a_bounded_match_of_one_id_does_not_hide_another_inside_it(lake: Lake) -> None:
    # `x` bounded inside `x.y` (a dot is no id character here): a batch of both finds both.
    os.makedirs(lake.path("changes"), exist_ok=True)
    with open(lake.path("changes/stray.bin"), "wb") as stray:
        stray.write(b"held: x.y")
    found = scan_table_for(lake, "changes", ["x", "x.y", "y"])
    assert {user: found.traces_of(user) for user in ("x", "x.y", "y")} == {"x": 1, "x.y": 1, "y": 1}


def test_a_scan_past_its_time_raises_instead_of_answering(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    with pytest.raises(TimeoutError):
        AnalyticsLakeEraser(lake).traces_for(["u001"], until=time.monotonic() - 1)


def test_purges_asked_while_one_runs_share_the_next_one(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    _land(lake, history)
    eraser = AnalyticsLakeEraser(lake)
    calls: list[frozenset[str]] = []
    first_running, release = threading.Event(), threading.Event()

    def observed(lake: Lake, user_ids: frozenset[str], **kwargs: object) -> PurgeCounts:
        calls.append(frozenset(user_ids))
        if len(calls) == 1:
            first_running.set()
            release.wait(30)
        return purge_users(lake, user_ids, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("analytics.lake.eraser.purge_users", observed)
    results: dict[str, Mapping[str, Mapping[str, int]]] = {}

    def purge(user: str) -> None:
        results[user] = eraser.purge([user])

    threads = [threading.Thread(target=purge, args=(user,)) for user in ("u001", "u002", "u003")]
    threads[0].start()
    assert first_running.wait(30)
    for thread in threads[1:]:
        thread.start()
    while eraser._purges_waiting() < 2:  # both later calls are waiting for the running purge
        time.sleep(0.01)
    release.set()
    for thread in threads:
        thread.join(60)
    assert calls == [frozenset({"u001"}), frozenset({"u002", "u003"})]
    assert all(results[user][user]["changes"] > 0 for user in results)

"""analytics/lake/purge.py: every row of the given users leaves every dataset; nothing else changes."""

from __future__ import annotations

from functools import partial

from analytics.lake import Lake, purge_users, read_snapshot, snapshot, snapshot_as_of
from analytics.views import connect
from tests.analytics.lakesim import TableSim, land, replay, state_rows

_land = partial(land, flush_rows=25)


def _count(lake: Lake, sql: str) -> int:
    return int(connect(lake).execute(sql).fetchall()[0][0])


def test_purge_removes_the_users_rows_from_every_dataset(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    snapshot(lake)
    snapshot_as_of(lake, history.events[100].created_at)
    erased = {"u001", "u002", "u003"}
    in_log = _count(lake, "SELECT count(*) FROM raw_changes WHERE user_id IN ('u001', 'u002', 'u003')")
    in_outcomes = _count(lake, "SELECT count(*) FROM raw_outcomes WHERE user_id IN ('u001', 'u002', 'u003')")
    assert in_log and in_outcomes
    counts = purge_users(lake, erased)
    assert counts.rows["changes"] == in_log
    assert counts.rows["outcomes"] == in_outcomes
    assert counts.rows["snapshots/state"] > 0 and counts.rows["snapshots/as_of"] > 0
    for view in ("raw_changes", "raw_outcomes", "snapshot_items"):
        assert _count(lake, f"SELECT count(*) FROM {view} WHERE user_id IN ('u001', 'u002', 'u003')") == 0
    assert _count(lake, "SELECT count(*) FROM raw_changes WHERE pk IN ('USER#u001', 'USER#u002')") == 0


def test_other_users_are_untouched_and_snapshots_still_work(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    snapshot(lake)
    purge_users(lake, ["u004"])
    kept = [e for e in history.events if e.user_id != "u004"]
    assert _count(lake, "SELECT count(*) FROM changes") == len(kept)
    assert state_rows(read_snapshot(lake)) == replay(kept)
    snapshot(lake)
    assert state_rows(read_snapshot(lake)) == replay(kept)


def test_purging_nobody_or_an_unknown_user_changes_nothing(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    assert purge_users(lake, []).total_rows == 0
    counts = purge_users(lake, ["nobody"])
    assert counts.total_rows == 0 and not any(counts.files_rewritten.values())
    assert _count(lake, "SELECT count(*) FROM changes") == len(history.events)

"""analytics/lake/purge.py: every row of the given users leaves every dataset; nothing else changes; files of
failed commits older than the bound go, younger ones and referenced ones stay; the lake ends owner-only."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.lake import (
    Lake,
    compact,
    purge_users,
    read_snapshot,
    snapshot,
    snapshot_as_of,
    state_at_version,
)
from analytics.lake._versions import oldest_version
from analytics.lake.purge import ORPHAN_AGE, remove_orphans
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


def _modes(lake: Lake) -> set[tuple[str, int]]:
    found = {("folder", os.stat(lake.base).st_mode & 0o777)}
    for folder, folders, names in os.walk(lake.base):
        found |= {("folder", os.stat(os.path.join(folder, n)).st_mode & 0o777) for n in folders}
        found |= {("file", os.stat(os.path.join(folder, n)).st_mode & 0o777) for n in names}
    return found


def test_after_a_purge_every_file_of_the_lake_is_0600_and_every_folder_0700(
    lake: Lake, history: TableSim
) -> None:
    previous = os.umask(0o022)  # delta-rs creates with the umask: the common one makes files 0644
    try:
        _land(lake, history)
        snapshot(lake)
        snapshot_as_of(lake, history.events[100].created_at)
        purge_users(lake, ["u001"])
    finally:
        os.umask(previous)
    assert _modes(lake) == {("folder", 0o700), ("file", 0o600)}


def test_a_purge_keeps_every_file_a_version_references_however_old(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    snapshot(lake)
    far = datetime.now(UTC) + timedelta(days=3650)  # every file is older than the orphan bound
    counts = purge_users(lake, ["nobody"], clock=lambda: far)
    assert not any(counts.orphans_removed.values())
    assert _count(lake, "SELECT count(*) FROM changes") == len(history.events)
    assert state_rows(read_snapshot(lake)) == replay(history.events)


def test_a_purge_deletes_an_unreferenced_file_older_than_the_bound_and_keeps_a_younger_one(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    young, old = (lake.path(f"changes/part-0000{n}-stray-c000.zstd.parquet") for n in (1, 2))
    for path in (young, old):
        pq.write_table(pa.table({"user_id": ["u001"]}), path)
    stamp = (datetime.now(UTC) - ORPHAN_AGE - timedelta(minutes=1)).timestamp()
    os.utime(old, (stamp, stamp))
    counts = purge_users(lake, ["u001"])
    assert (counts.orphans_removed["changes"], os.path.exists(young), os.path.exists(old)) == (1, True, False)


def test_orphan_removal_keeps_the_files_of_every_version_the_log_still_holds(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    purge_users(lake, ["nobody"])  # the log now starts at the purge's checkpoint
    oldest = oldest_version(lake, "changes")
    compact(lake, small_file_bytes=10**9)  # removes the files that version reads
    far = datetime.now(UTC) + timedelta(days=3650)
    removed = remove_orphans(lake, "changes", older_than=far)
    assert oldest is not None and removed == 0
    assert state_rows(state_at_version(lake, oldest)) == replay(history.events)

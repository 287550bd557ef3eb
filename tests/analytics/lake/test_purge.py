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
from analytics.lake._delta import append, ensure_table, open_table
from analytics.lake._schema import AUDIT_FAILURES, AUDIT_FAILURES_SCHEMA
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


def _store_findings(lake: Lake, rows: list[dict[str, object]]) -> None:
    table = ensure_table(lake, AUDIT_FAILURES, AUDIT_FAILURES_SCHEMA)
    base = {"audit_id": "a1", "audited_at": datetime(2026, 1, 2, tzinfo=UTC), "as_of": None}
    full = [
        {**base, "check_name": "c", "scope": "s", "status": "fail", "row_number": n, **row}
        for n, row in enumerate(rows)
    ]
    append(lake, table, AUDIT_FAILURES, pa.Table.from_pylist(full, schema=AUDIT_FAILURES_SCHEMA))


def test_a_stored_finding_naming_the_user_only_in_its_json_is_deleted_and_one_naming_a_longer_id_kept(
    lake: Lake,
) -> None:
    _store_findings(
        lake,
        [
            {"user_id": "u7", "other_user_id": None, "pk": "USER#u7", "row": '{"item_user_id": "u001"}'},
            {"user_id": "u8", "other_user_id": None, "pk": "USER#u8", "row": '{"note": "u0010"}'},
        ],
    )
    counts = purge_users(lake, ["u001"])
    table = open_table(lake, AUDIT_FAILURES)
    assert table is not None
    left = table.to_pyarrow_table(columns=["user_id"])["user_id"].to_pylist()
    assert (counts.rows[AUDIT_FAILURES], left) == (1, ["u8"])


def test_a_commits_temporary_log_file_older_than_the_bound_is_deleted(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    log = lake.path("changes/_delta_log")
    leftover = os.path.join(log, "_commit_0b4e6d2c-5f7a-4c1e-9d3b-2a8f6e1c7d90.json.tmp")
    with open(leftover, "w") as handle:
        handle.write(
            '{"add": {"path": "x.parquet", "stats": "{\\"minValues\\": {\\"user_id\\": \\"u001\\"}}"}}\n'
        )
    stamp = (datetime.now(UTC) - ORPHAN_AGE - timedelta(minutes=1)).timestamp()
    os.utime(leftover, (stamp, stamp))
    entries = sorted(name for name in os.listdir(log) if not name.endswith(".tmp"))
    purge_users(lake, ["nobody"])
    after = sorted(os.listdir(log))
    assert (
        not os.path.exists(leftover)
        and set(after) - set(entries)
        and _count(lake, "SELECT count(*) FROM changes")
    )

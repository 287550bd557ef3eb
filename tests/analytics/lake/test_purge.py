"""analytics/lake/purge.py: every row of the given users leaves every dataset; nothing else changes; files of
failed commits older than the bound go, younger ones and referenced ones stay; the lake ends owner-only."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.lake import Lake
from analytics.lake._delta import append, ensure_table, expunge, open_table
from analytics.lake._schema import AUDIT_FAILURES, AUDIT_FAILURES_SCHEMA
from analytics.lake._versions import oldest_version
from analytics.lake.compaction import compact
from analytics.lake.purge import ORPHAN_AGE, purge_users, remove_orphans
from analytics.lake.snapshots import read_snapshot, snapshot, snapshot_as_of, state_at_version
from analytics.lake.views import connect
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
    expunge(lake, "changes")  # the log now starts at a checkpoint, as after a purge's clean-up
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
    assert (  # the leftover gone, every committed entry kept (the sweep runs when nothing is purged too)
        not os.path.exists(leftover)
        and set(entries) <= set(after)
        and _count(lake, "SELECT count(*) FROM changes")
    )


def _rows_of(lake: Lake, name: str, user: str) -> int:
    """The user's rows in table `name`, read with deltalake's own reader (the same predicate's columns)."""
    table = open_table(lake, name)
    assert table is not None
    data = table.to_pyarrow_table()
    columns = [c for c in ("user_id", "other_user_id") if c in data.column_names]
    return sum(
        1
        for row in data.to_pylist()
        if any(row[c] == user for c in columns) or row.get("pk") == f"USER#{user}"
    )


def test_purge_counts_each_users_rows_per_table_not_the_batchs(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    snapshot(lake)
    users = ["u001", "u002", "u003"]
    before = {
        user: {name: _rows_of(lake, name, user) for name in ("changes", "outcomes", "snapshots/state")}
        for user in users
    }
    counts = purge_users(lake, users)
    assert {user: {n: counts.rows_by_user[user].get(n, 0) for n in before[user]} for user in users} == before
    assert len({tuple(per_table.values()) for per_table in before.values()}) > 1  # the users differ
    assert counts.rows["changes"] == sum(before[user]["changes"] for user in users)


def test_a_user_with_no_rows_is_counted_nowhere(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    counts = purge_users(lake, ["u001", "nobody"])
    assert "nobody" not in counts.rows_by_user and counts.rows_by_user["u001"]["changes"] > 0


def _log_entries(lake: Lake) -> list[str]:
    return sorted(os.listdir(lake.path("changes/_delta_log")))


def test_a_table_holding_none_of_the_users_and_only_appends_since_its_clean_up_is_left_as_it_is(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    purge_users(lake, ["u001"])  # a clean-up: the log starts at its checkpoint
    history.random_history(users=30, operations=40)
    _land(lake, history)  # appends after it (what was landed before is dropped as a replay)
    before = _log_entries(lake)
    counts = purge_users(lake, ["nobody"])
    assert counts.total_rows == 0 and _log_entries(lake) == before  # no DELETE, no clean-up commit


def test_a_table_whose_log_holds_a_removal_is_cleaned_though_it_holds_none_of_the_users(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    purge_users(lake, ["u001"])
    compact(lake, small_file_bytes=10**9)  # removes files: their log entries still name what they held
    purge_users(lake, ["nobody"])
    assert oldest_version(lake, "changes") == max(
        int(entry.split(".")[0]) for entry in _log_entries(lake) if entry.endswith(".checkpoint.parquet")
    )
    held = [entry for entry in _log_entries(lake) if entry.endswith(".json")]
    assert not any('"remove"' in Path(lake.path(f"changes/_delta_log/{entry}")).read_text() for entry in held)

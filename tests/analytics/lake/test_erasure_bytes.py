"""analytics/lake/purge.py: after a purge, no byte of any file of the lake names an erased user or their
accounts: data files, the Delta logs, checkpoints, files removed by earlier rewrites, files a failed
commit left and files a refused compaction wrote; and the other users are intact. On local disk and on
moto's S3."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from deltalake.exceptions import DeltaError

from analytics import AnalyticsLakeEraser
from analytics.lake import Lake, LakeHandler
from analytics.lake import _commits as commits_module
from analytics.lake._delta import delete_rows, open_table
from analytics.lake._high_water import Plan as HighWaterPlan
from analytics.lake._traces import table_files
from analytics.lake.compaction import compact
from analytics.lake.purge import ORPHAN_AGE, purge_users
from analytics.lake.snapshots import snapshot, snapshot_as_of
from analytics.lake.views import connect
from config import LakeSettings
from schema.errors import RetryableError
from tests.analytics.lake.delta_files import data_files
from tests.analytics.lake.failed_commit import failing_commits
from tests.analytics.lakesim import TableSim

ERASED = "u001"


def _later() -> datetime:
    """A clock past the orphan bound of every file written so far: the erasure's next pass."""
    return datetime.now(UTC) + ORPHAN_AGE + timedelta(minutes=1)


def _land(lake: Lake, sim: TableSim, flush_rows: int) -> None:
    handler = LakeHandler(lake, LakeSettings(flush_rows=flush_rows))
    for event in sim.events:
        handler.add(event)
    for outcome in sim.outcomes:
        handler.add_outcome(outcome)
    handler.flush()


def _files_naming(lake: Lake, *needles: str) -> list[str]:
    """Every file under the lake's root (read through its filesystem: local disk or S3) whose bytes, or
    whose Parquet content written out uncompressed, hold one of `needles`; lake-relative."""
    wanted = [needle.encode() for needle in needles]
    selector = pafs.FileSelector(lake.base, recursive=True)
    found = []
    for info in lake.fs.get_file_info(selector):
        if info.type != pafs.FileType.File:
            continue
        with lake.fs.open_input_stream(info.path) as handle:
            raw = handle.read()
        held = any(needle in raw for needle in wanted)
        if not held and raw[:4] == b"PAR1":
            sink = pa.BufferOutputStream()
            pq.write_table(pq.read_table(pa.BufferReader(raw)), sink, compression="none")
            plain = sink.getvalue().to_pybytes()
            held = any(needle in plain for needle in wanted)
        if held:
            found.append(lake.relative(info.path))
    return sorted(found)


def _accounts_of(lake: Lake, user_id: str) -> list[str]:
    """The account ids only `user_id`'s rows name (read before the purge)."""
    rows = (
        connect(lake)
        .execute(
            """
        WITH named AS (
            SELECT user_id, new_array_account_id AS account FROM raw_changes
            UNION ALL SELECT user_id, old_array_account_id FROM raw_changes
            UNION ALL SELECT user_id, array_account_id FROM raw_outcomes
        )
        SELECT DISTINCT account FROM named WHERE user_id = ? AND account IS NOT NULL
        EXCEPT SELECT account FROM named WHERE user_id IS DISTINCT FROM ? AND account IS NOT NULL
        """,
            [user_id, user_id],
        )
        .fetchall()
    )
    return sorted(str(account) for (account,) in rows)


def _failed_landing(lake: Lake, sim: TableSim, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A landing whose commit fails after writing its data files (the erased user's events, replayed);
    returns those files, lake-relative. The replay lands without the high-water marks' plan, which would
    otherwise drop every event as already landed and leave nothing to commit."""
    monkeypatch.setattr(commits_module, "plan_changes", lambda _table, data, **_: HighWaterPlan(data))
    written = failing_commits(monkeypatch, lake)
    handler = LakeHandler(lake, LakeSettings(flush_rows=10**6))
    for event in sim.events:
        if event.user_id == ERASED:
            handler.add(event)
    with pytest.raises(RetryableError):
        handler.flush()
    monkeypatch.undo()
    return sorted(lake.relative(path) for path in written)


def _rich_lake(lake: Lake, history: TableSim) -> None:
    """Landed, replayed, compacted, snapshotted (base and delta) and an as-of state: every kind of file."""
    half = TableSim(seed=0)
    half.events, half.outcomes = history.events[:200], history.outcomes
    _land(lake, half, flush_rows=9)
    snapshot(lake)
    _land(lake, history, flush_rows=13)  # the rest, and a replay of the first part
    compact(lake, small_file_bytes=10**9)
    snapshot(lake, consolidate_ratio=100.0)
    snapshot_as_of(lake, history.events[150].created_at)


def test_the_byte_scan_finds_the_user_before_the_purge(lake: Lake, history: TableSim) -> None:
    _rich_lake(lake, history)
    named = _files_naming(lake, ERASED)
    assert any("_delta_log" in path for path in named)
    assert any(path.startswith("changes/event_date=") for path in named)


def test_after_a_purge_no_file_of_the_lake_names_the_erased_user(lake: Lake, history: TableSim) -> None:
    _rich_lake(lake, history)
    purge_users(lake, [ERASED])
    assert _files_naming(lake, ERASED) == []


def test_after_a_purge_the_other_users_are_intact(lake: Lake, history: TableSim) -> None:
    _rich_lake(lake, history)
    purge_users(lake, [ERASED])
    kept = [e for e in history.events if e.user_id != ERASED]
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(kept),)]
    assert con.execute("SELECT count(*) FROM changes WHERE user_id = ?", [ERASED]).fetchall() == [(0,)]


def test_the_fault_leaves_files_no_version_references_holding_the_user(
    any_lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    _land(any_lake, history, flush_rows=60)
    orphans = _failed_landing(any_lake, history, monkeypatch)
    referenced = set(data_files(any_lake, "changes"))
    assert orphans and referenced and not set(orphans) & referenced
    assert set(orphans) <= set(_files_naming(any_lake, ERASED))


def test_holds_answers_yes_while_a_failed_commits_file_holds_the_user_and_no_once_purged(
    any_lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    _land(any_lake, history, flush_rows=60)
    orphans = _failed_landing(any_lake, history, monkeypatch)
    now = AnalyticsLakeEraser(any_lake)  # the files are younger than ORPHAN_AGE: maybe a commit in flight
    now.purge([ERASED])
    left = (now.holds(ERASED), _files_naming(any_lake, ERASED))
    later = AnalyticsLakeEraser(any_lake, clock=_later)
    later.purge([ERASED])
    assert (left, later.holds(ERASED)) == ((True, orphans), False)


def test_an_erasure_after_a_failed_commit_leaves_no_file_under_the_root_naming_the_user_or_accounts(
    any_lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    _land(any_lake, history, flush_rows=60)
    accounts = _accounts_of(any_lake, ERASED)
    _failed_landing(any_lake, history, monkeypatch)
    eraser = AnalyticsLakeEraser(any_lake, clock=_later)
    held_before = eraser.holds(ERASED)
    eraser.mask([ERASED])
    eraser.purge([ERASED])  # pass one
    eraser.purge([ERASED])  # pass two
    eraser.unmask([ERASED])
    assert accounts and held_before is True
    assert (eraser.holds(ERASED), _files_naming(any_lake, ERASED, *accounts)) == (False, [])


def test_a_compaction_refused_by_the_purge_leaves_no_trace_after_the_purge(
    any_lake: Lake, history: TableSim
) -> None:
    _land(any_lake, history, flush_rows=9)
    compactor = open_table(any_lake, "changes")  # the compaction reads the table before the purge
    assert compactor is not None
    # The race: the purge's DELETE (its first step, called alone here) commits while the compaction is
    # merging, so the compaction writes its files from the version it read, the user's rows with them,
    # and its commit is refused (it removes files the DELETE removed).
    delete_rows(any_lake, "changes", f"user_id = '{ERASED}' OR pk = 'USER#{ERASED}'")
    before = len(table_files(any_lake, "changes"))
    with pytest.raises(DeltaError):
        compactor.optimize.compact(target_size=10**9)
    refused = open_table(any_lake, "changes")
    assert refused is not None and refused.history(1)[0]["operation"] == "DELETE"
    assert len(table_files(any_lake, "changes")) > before  # the refused compaction's files stay
    eraser = AnalyticsLakeEraser(any_lake, clock=_later)
    refused_left = eraser.holds(ERASED)
    eraser.purge([ERASED])
    assert (refused_left, eraser.holds(ERASED), _files_naming(any_lake, ERASED)) == (True, False, [])


def test_a_purge_racing_landings_and_compactions_leaves_no_trace_once_the_next_pass_runs(
    lake: Lake, history: TableSim
) -> None:
    # Local disk only: the same interleavings on S3 are the deterministic refusal test above, and
    # threads racing over moto take minutes.
    _land(lake, history, flush_rows=10)
    others = [event for event in history.events if event.user_id != ERASED]
    stop = threading.Event()
    failures: list[str] = []

    def landing() -> None:  # replays of the other users, a commit every 3 rows
        start = 0
        while not stop.is_set():
            try:
                handler = LakeHandler(lake, LakeSettings(flush_rows=3))
                for event in others[start : start + 30]:
                    handler.add(event)
                handler.flush()
            except Exception as error:
                failures.append(f"landing: {type(error).__name__}")
            start = (start + 30) % len(others)

    def compacting() -> None:
        while not stop.is_set():
            try:
                compact(lake, small_file_bytes=10**9)
            except Exception as error:
                failures.append(f"compaction: {type(error).__name__}")

    threads = [threading.Thread(target=landing), threading.Thread(target=compacting)]
    for thread in threads:
        thread.start()
    try:
        AnalyticsLakeEraser(lake).purge([ERASED])
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    # What the verifier answers after the first pass is what the bytes say (a refused compaction's
    # files may still hold the user, younger than the orphan bound); the next pass leaves nothing.
    first = AnalyticsLakeEraser(lake)
    agreed = first.holds(ERASED) == bool(_files_naming(lake, ERASED))
    later = AnalyticsLakeEraser(lake, clock=_later)
    later.purge([ERASED])
    kept = connect(lake).execute("SELECT count(*) FROM changes").fetchall()
    assert (failures, agreed, later.holds(ERASED), _files_naming(lake, ERASED)) == ([], True, False, [])
    assert kept == [(len(others),)]

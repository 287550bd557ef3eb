"""analytics/lake/compaction.py: Delta OPTIMIZE merges each partition's small files, one commit per table;
the views, snapshots and exactly-once are unchanged, and a purge that overlaps it wins."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

import pytest
from deltalake.exceptions import CommitFailedError, DeltaError

from analytics.lake import CHANGES, Lake, LakeHandler
from analytics.lake import _commits as commits_module
from analytics.lake._delta import delete_rows, open_table
from analytics.lake._high_water import Plan as HighWaterPlan
from analytics.lake._schema import OUTCOMES
from analytics.lake.compaction import CompactionResult, compact, compact_continuously, tier_target
from analytics.lake.maintenance import MaintenancePolicy, MaintenanceRunner
from analytics.lake.purge import purge_users
from analytics.lake.snapshots import read_snapshot, snapshot
from analytics.lake.views import connect
from config import LakeSettings
from tests.analytics.lake.delta_files import data_files
from tests.analytics.lakesim import TableSim, land, replay, state_rows

_land = partial(land, flush_rows=10)


def _partitions(paths: list[str]) -> set[str]:
    return {path.rsplit("/", 1)[0] for path in paths}


def test_small_files_merge_into_one_file_per_partition(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    before = data_files(lake, CHANGES)
    result = compact(lake, small_file_bytes=10**9)
    after = data_files(lake, CHANGES)
    assert len(after) == len(_partitions(before)) < len(before)
    assert result.files_merged[CHANGES] >= len(before) - len(_partitions(before))


def test_compaction_keeps_every_event_exactly_once_in_the_views(lake: Lake, history: TableSim) -> None:
    _land(lake, history, flush_rows=10)
    _land(lake, history, flush_rows=17)  # a replay with other batch boundaries
    compact(lake, small_file_bytes=10**9)
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(history.events),)]
    assert con.execute("SELECT count(*) FROM outcomes").fetchall() == [(len(history.outcomes),)]


def test_compaction_removes_the_duplicates_of_a_replay(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    _land(lake, history, flush_rows=10)
    # The replay lands without the high-water marks' plan, as before they were kept: duplicates.
    monkeypatch.setattr(commits_module, "plan_changes", lambda _table, data, **_: HighWaterPlan(data))
    _land(lake, history, flush_rows=17)
    result = compact(lake, small_file_bytes=10**9)
    assert result.duplicates_dropped[CHANGES] == len(history.events)
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM raw_changes").fetchall() == [(len(history.events),)]


def test_large_files_are_left_alone(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    before = data_files(lake, CHANGES)
    result = compact(lake, small_file_bytes=1)
    assert data_files(lake, CHANGES) == before
    assert not result.files_written.get(CHANGES)


def test_nothing_to_do_on_an_empty_lake(lake: Lake) -> None:
    result = compact(lake)
    assert not any(result.files_written.values())
    assert data_files(lake, OUTCOMES) == []


def test_a_snapshot_after_compaction_reads_nothing_again(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    snapshot(lake)
    compact(lake, small_file_bytes=10**9)
    result = snapshot(lake)
    assert result.files_read == 0
    assert state_rows(read_snapshot(lake)) == replay(history.events)


def test_a_compaction_planned_before_a_purge_cannot_write_the_purged_rows_back(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    compactor = open_table(lake, CHANGES)  # the compaction reads the table as it is now
    assert compactor is not None
    purge_users(lake, ["u001"])  # the purge commits first
    with pytest.raises(DeltaError):  # its files were purged (and vacuumed): it cannot commit
        compactor.optimize.compact(target_size=10**9)
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM raw_changes WHERE user_id = 'u001'").fetchall() == [(0,)]
    kept = [e for e in history.events if e.user_id != "u001"]
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(kept),)]


def test_continuous_compaction_keeps_a_partition_to_a_few_files_as_landing_goes_on(lake: Lake) -> None:
    sim = TableSim(seed=5)
    for n in range(30):
        sim.signup(f"u{n:03d}", f"a{n:03d}")  # one day, one shard
    handler = LakeHandler(lake, LakeSettings(flush_rows=1))
    pauses: list[float] = []

    def land_more(seconds: float) -> None:
        pauses.append(seconds)
        for event in sim.events[len(pauses) * 10 : (len(pauses) + 1) * 10]:
            handler.add(event)

    for event in sim.events[:10]:
        handler.add(event)
    compact_continuously(lake, interval_seconds=60, first_tier_bytes=10**9, rounds=3, sleep=land_more)
    assert pauses == [60, 60]
    assert len(data_files(lake, CHANGES)) <= 2  # the last round's merge plus nothing, or one landed file
    assert connect(lake).execute("SELECT count(*) FROM changes").fetchall() == [(len(sim.events),)]


def test_each_tier_runs_every_fanout_power_rounds_so_a_row_is_rewritten_about_once_per_tier() -> None:
    targets = [tier_target(n, 1, fanout=4, tiers=3) for n in range(1, 17)]
    assert targets == [1, 1, 1, 4, 1, 1, 1, 4, 1, 1, 1, 4, 1, 1, 1, 16]


def test_delta_refuses_the_commit_of_a_compaction_that_read_files_a_delete_removed(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    compactor = open_table(lake, CHANGES)
    assert compactor is not None
    delete_rows(lake, CHANGES, "user_id IN ('u001')")  # the files are still there: no vacuum yet
    with pytest.raises(CommitFailedError):
        compactor.optimize.compact(target_size=10**9)
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM raw_changes WHERE user_id = 'u001'").fetchall() == [(0,)]


def test_compaction_reports_its_progress_one_table_at_a_time(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    calls: list[tuple[int, int]] = []
    compact(lake, small_file_bytes=1 << 30, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 2), (1, 2), (2, 2)]


def test_landing_compaction_and_purges_on_one_table_at_once_fail_nothing_and_keep_every_kept_row(
    lake: Lake, history: TableSim
) -> None:
    erased = ["u001", "u002"]
    first = LakeHandler(lake)
    for event in history.events:
        if event.user_id in erased:
            first.add(event)
    first.flush()
    kept = [e for e in history.events if e.user_id not in erased]
    failures: list[BaseException] = []
    landed = threading.Event()
    rounds: list[CompactionResult] = []

    def guarded(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as error:  # the test reports it
                failures.append(error)

        return run

    def land_kept() -> None:
        handler = LakeHandler(lake, LakeSettings(flush_rows=10_000))
        try:
            for start in range(0, len(kept), 6):
                for event in kept[start : start + 6]:
                    handler.add(event)
                handler.flush()
        finally:
            landed.set()

    def compact_until_landed() -> None:
        while not landed.is_set():
            rounds.append(compact(lake, small_file_bytes=10**9))

    def purge_until_landed() -> None:
        for user in erased:
            purge_users(lake, [user])
        number = 0
        while not landed.is_set():
            purge_users(lake, [f"nobody-{number}"])
            number += 1

    threads = [
        threading.Thread(target=guarded(work))
        for work in (land_kept, compact_until_landed, purge_until_landed)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert rounds  # compaction ran beside them
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(kept),)]
    assert con.execute("SELECT count(*) FROM raw_changes WHERE user_id IN ('u001', 'u002')").fetchall() == [
        (0,)
    ]


def test_a_compaction_refused_the_maintenance_lease_merges_nothing(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    before = {name: data_files(lake, name) for name in (CHANGES, OUTCOMES)}
    assert MaintenanceRunner(lake, MaintenancePolicy(compact_every_commits=10**6)).step().leader

    result = compact(lake, exclusive=MaintenanceRunner(lake).hold)

    assert dict(result.not_leader) == {CHANGES: 1, OUTCOMES: 1}
    assert sum(result.files_merged.values()) == 0
    assert {name: data_files(lake, name) for name in (CHANGES, OUTCOMES)} == before


def test_a_compaction_beside_the_leaders_at_one_instant_runs_once_and_keeps_every_row_once(
    any_lake: Lake, history: TableSim
) -> None:
    """The hazard the lease exists for: two OPTIMIZEs of one version would both commit."""
    _land(any_lake, history)
    policy = MaintenancePolicy(compact_every_commits=10, first_tier_bytes=1 << 30)
    leader, command = MaintenanceRunner(any_lake, policy), MaintenanceRunner(any_lake, policy)
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def run(work: Callable[[], object]) -> None:
        barrier.wait()
        try:
            work()
        except BaseException as error:  # a failed side must fail the test, not vanish in a thread
            failures.append(error)

    threads = [
        threading.Thread(target=run, args=(leader.step,)),
        threading.Thread(target=run, args=(partial(compact, any_lake, exclusive=command.hold),)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures
    table = open_table(any_lake, CHANGES)
    assert table is not None
    optimizes = [e for e in table.history() if e.get("operation") == "OPTIMIZE"]
    assert len(optimizes) == 1
    rows = table.to_pyarrow_table(columns=["stream_arn", "shard_id", "sequence_number"])
    assert rows.num_rows == rows.group_by(rows.column_names).aggregate([]).num_rows == len(history.events)

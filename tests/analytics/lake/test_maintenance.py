"""analytics/lake/maintenance.py: checkpoints at the interval, compaction at the cadence, one runner at a
time through the lease (two delta-rs OPTIMIZEs of one version would both commit), nothing lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable, write_deltalake

from analytics.lake import CHANGES, Lake, default_allow_list
from analytics.lake._delta import open_table
from analytics.lake._files import ensure_layout
from analytics.lake._schema import CHANGE_IDENTITY, OUTCOMES
from analytics.lake.landing import LakeHandler
from analytics.lake.maintenance import (
    MAINTENANCE_TABLE,
    STATS_COLUMNS,
    MaintenancePolicy,
    MaintenanceRunner,
    RoundResult,
    stable_owner,
)
from config import LakeSettings
from tests.analytics.lake.delta_files import data_files
from tests.analytics.lakesim import TableSim, land

_land = partial(land, flush_rows=10)
_POLICY = MaintenancePolicy(checkpoint_interval=10, compact_every_commits=10, first_tier_bytes=1 << 30)


@pytest.fixture
def history() -> TableSim:
    """Two shards, a couple of hundred changes over a few days: a few dozen commits of 10 rows."""
    return _history(seed=7)


def _history(seed: int, start: datetime | None = None) -> TableSim:
    sim = TableSim(shards=("shardId-00000001-aaaa", "shardId-00000002-bbbb"), seed=seed)
    if start is not None:
        sim = TableSim(shards=sim.shards, seed=seed, start=start)
    sim.random_history(users=12, operations=150)
    return sim


class _Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _rows_and_identities(lake: Lake) -> tuple[int, int]:
    """`changes` read as any outside reader reads it (delta-rs, no dedupe): rows, distinct identities."""
    table = open_table(lake, CHANGES)
    assert table is not None
    data = table.to_pyarrow_table(columns=list(CHANGE_IDENTITY))
    distinct = data.group_by(list(CHANGE_IDENTITY)).aggregate([]).num_rows
    return data.num_rows, distinct


def _optimize_commits(lake: Lake, name: str = CHANGES) -> int:
    table = open_table(lake, name)
    assert table is not None
    return sum(1 for entry in table.history() if entry.get("operation") == "OPTIMIZE")


def _checkpoints(lake: Lake, name: str) -> list[str]:
    selector = pafs.FileSelector(lake.path(f"{name}/_delta_log"), allow_not_found=True)
    return sorted(i.base_name for i in lake.fs.get_file_info(selector) if ".checkpoint." in i.base_name)


def test_the_policy_comes_from_the_lake_settings() -> None:
    settings = LakeSettings(checkpoint_interval=50, compact_every_commits=300, log_retention_hours=36)
    policy = MaintenancePolicy.from_settings(settings)
    assert (policy.checkpoint_interval, policy.compact_every_commits) == (50, 300)
    assert policy.table_properties() == {
        "delta.checkpointInterval": "50",
        "delta.deletedFileRetentionDuration": "interval 7 days",
        "delta.logRetentionDuration": "interval 36 hours",
    }


def test_the_leader_sets_the_cadence_on_each_table(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    result = MaintenanceRunner(lake, _POLICY).step()
    assert result.leader
    for name in (CHANGES, OUTCOMES):
        table = open_table(lake, name)
        assert table is not None
        configuration = table.metadata().configuration
        assert configuration["delta.checkpointInterval"] == "10"
        assert configuration["delta.logRetentionDuration"] == "interval 30 days"


def test_the_leader_checkpoints_a_table_once_the_interval_of_commits_landed(
    lake: Lake, history: TableSim
) -> None:
    ensure_layout(lake, default_allow_list())
    runner = MaintenanceRunner(lake, MaintenancePolicy(checkpoint_interval=10, compact_every_commits=10**6))
    runner.step()
    _land(lake, history)  # dozens of commits of 10 rows
    assert _checkpoints(lake, CHANGES) == []  # appends write none
    table = open_table(lake, CHANGES)
    assert table is not None and table.version() >= 10
    assert CHANGES in runner.step().checkpointed
    assert _checkpoints(lake, CHANGES) == [f"{table.version():020d}.checkpoint.parquet"]
    assert CHANGES not in runner.step().checkpointed  # none due until ten more commits land


def test_compaction_runs_once_enough_commits_landed_and_keeps_every_row_once(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    before = data_files(lake, CHANGES)
    rows_before = _rows_and_identities(lake)
    result = MaintenanceRunner(lake, _POLICY).step()
    after = data_files(lake, CHANGES)
    assert CHANGES in result.compacted
    assert len(after) < len(before) // 4
    assert _rows_and_identities(lake) == rows_before == (len(history.events), len(history.events))


def test_no_compaction_before_the_cadence_comes_round(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    before = data_files(lake, CHANGES)
    result = MaintenanceRunner(lake, MaintenancePolicy(compact_every_commits=10_000)).step()
    assert result.leader and result.compacted == []
    assert data_files(lake, CHANGES) == before


def test_the_next_compaction_waits_for_the_next_commits(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    clock = _Clock()
    runner = MaintenanceRunner(lake, _POLICY, clock=clock)
    assert CHANGES in runner.step().compacted
    assert CHANGES not in runner.step().compacted  # nothing landed since
    _land(lake, _history(seed=3, start=history.now))
    assert CHANGES in runner.step().compacted


def test_one_runner_holds_the_lease_until_it_expires(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    clock = _Clock()
    first = MaintenanceRunner(lake, _POLICY, clock=clock)
    second = MaintenanceRunner(lake, _POLICY, clock=clock)
    assert first.step().leader
    assert not second.step().leader
    clock.now += _POLICY.lease_seconds + 1  # the first runner stopped looking: its lease runs out
    assert second.step().leader
    assert not first.step().leader  # it finds the row moved on: it lost the lease


def test_the_leader_renews_its_lease_at_half_life(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    clock = _Clock()
    runner = MaintenanceRunner(lake, MaintenancePolicy(compact_every_commits=10**6), clock=clock)
    runner.step()
    table = open_table(lake, MAINTENANCE_TABLE)
    assert table is not None
    first = MaintenanceRunner.read_lease(table)
    clock.now += _POLICY.lease_seconds * 0.6
    assert runner.step().leader
    table = open_table(lake, MAINTENANCE_TABLE)
    assert table is not None
    renewed = MaintenanceRunner.read_lease(table)
    assert first is not None and renewed is not None
    assert renewed.lease_until == pytest.approx(clock.now + _POLICY.lease_seconds)
    assert renewed.lease_until > first.lease_until


def test_a_new_leader_takes_up_the_cadence_where_the_last_left_it(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    clock = _Clock()
    first = MaintenanceRunner(lake, _POLICY, clock=clock)
    assert CHANGES in first.step().compacted
    clock.now += _POLICY.lease_seconds * 0.6
    first.step()  # the renewal records the round
    clock.now += _POLICY.lease_seconds + 1
    second = MaintenanceRunner(lake, _POLICY, clock=clock)
    result = second.step()
    assert result.leader and CHANGES not in result.compacted


def test_two_runners_at_one_instant_compact_once_and_every_row_stays_once(
    any_lake: Lake, history: TableSim
) -> None:
    _land(any_lake, history)
    rows_before = _rows_and_identities(any_lake)
    runners = [MaintenanceRunner(any_lake, _POLICY) for _ in range(3)]
    barrier = threading.Barrier(len(runners))
    leaders: list[bool] = []
    failures: list[BaseException] = []

    def run(runner: MaintenanceRunner) -> None:
        barrier.wait()
        try:
            leaders.append(runner.step().leader)
        except BaseException as error:  # a failed runner must fail the test, not vanish in a thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(runner,)) for runner in runners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures
    assert sorted(leaders) == [False, False, True]
    assert _optimize_commits(any_lake) == 1
    assert _rows_and_identities(any_lake) == rows_before == (len(history.events), len(history.events))


def test_why_a_lease_two_delta_rs_optimizes_of_one_version_both_commit(tmp_path: Path) -> None:
    """The platform fact the lease exists for (deltalake 1.6.6): Delta's conflict check lets both
    through, and the table then holds the merged rows twice. Should delta-rs start refusing the
    second, this test says so and the lease becomes a saving, not a safeguard."""
    uri = f"{tmp_path}/t"
    for index in range(4):
        data = pa.table({"k": list(range(index * 10, index * 10 + 10))})
        DeltaTable.create(uri, schema=data.schema, mode="ignore")
        write_deltalake(uri, data, mode="append")
    first, second = DeltaTable(uri), DeltaTable(uri)
    first.optimize.compact()
    second.optimize.compact()
    assert DeltaTable(uri).to_pyarrow_table().num_rows == 80  # 40 rows, each twice


def test_poke_runs_a_step_in_the_background_at_most_every_check(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    ticks = _Clock(0.0)
    runner = MaintenanceRunner(lake, _POLICY, monotonic=ticks)
    runner.poke()
    runner.join(60)
    assert _optimize_commits(lake) == 1
    _land(lake, _history(seed=3, start=history.now))
    runner.poke()  # too soon: no step
    runner.join(60)
    assert _optimize_commits(lake) == 1
    ticks.now += _POLICY.check_seconds
    runner.poke()
    runner.join(60)
    assert _optimize_commits(lake) == 2


def test_a_failed_background_step_is_logged_by_type_only(
    lake: Lake, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = MaintenanceRunner(lake, _POLICY)

    def broken() -> None:
        raise OSError("s3://bucket/secret-user-id/x.parquet unreachable")

    monkeypatch.setattr(runner, "step", broken)
    with caplog.at_level("WARNING", logger="analytics.lake.maintenance"):
        runner.poke()
        runner.join(60)
    assert [r.getMessage() for r in caplog.records] == ["lake maintenance step failed"]
    assert caplog.records[0].error == "OSError"  # type: ignore[attr-defined]
    assert "secret-user-id" not in caplog.text


def test_the_leader_keeps_statistics_only_of_the_columns_the_lake_prunes_by(
    lake: Lake, history: TableSim
) -> None:
    ensure_layout(lake, default_allow_list())
    MaintenanceRunner(lake, _POLICY).step()
    _land(lake, history)
    for name in (CHANGES, OUTCOMES):
        table = open_table(lake, name)
        assert table is not None
        wanted = STATS_COLUMNS[name]
        assert table.metadata().configuration["delta.dataSkippingStatsColumns"] == ",".join(wanted)
        actions = pa.table(table.get_add_actions(flatten=True))
        stats = {c.split(".", 1)[1] for c in actions.column_names if c.startswith("min.")}
        assert stats <= set(wanted)


def test_a_replay_after_the_statistics_narrowed_still_lands_nothing_twice(
    lake: Lake, history: TableSim
) -> None:
    """The shards' high-water lookups prune files by the statistics the leader keeps."""
    ensure_layout(lake, default_allow_list())
    MaintenanceRunner(lake, MaintenancePolicy(compact_every_commits=10**6)).step()
    _land(lake, history)
    _land(lake, history)  # a replay of every event
    assert _rows_and_identities(lake) == (len(history.events), len(history.events))


def test_a_runner_under_the_owner_of_the_last_holder_takes_the_lease_back_at_once(lake: Lake) -> None:
    clock = _Clock()
    owner = stable_owner("host-a-0123456789ab")
    assert MaintenanceRunner(lake, _POLICY, owner=owner, clock=clock).step().leader
    # The consume restarted under its worker id: its lease, still valid, is its own.
    assert MaintenanceRunner(lake, _POLICY, owner=owner, clock=clock).step().leader
    assert not MaintenanceRunner(lake, _POLICY, owner=stable_owner("host-b"), clock=clock).step().leader


def test_a_released_lease_goes_to_the_next_runner_at_its_next_look(lake: Lake) -> None:
    clock = _Clock()
    first = MaintenanceRunner(lake, _POLICY, clock=clock)
    second = MaintenanceRunner(lake, _POLICY, clock=clock)
    assert first.step().leader
    assert not second.step().leader
    first.release()
    assert second.step().leader
    assert not first.step().leader


def test_two_consumes_running_maintenance_while_commits_land_compact_under_one_lease_only(
    lake: Lake,
) -> None:
    policy = replace(_POLICY, check_seconds=0.05)
    runners = [MaintenanceRunner(lake, policy, owner=stable_owner(f"worker-{n}")) for n in range(2)]
    compacted: dict[str, list[str]] = {runner.owner: [] for runner in runners}
    for runner in runners:
        step = runner.step

        def recorded(step: Callable[[], RoundResult] = step, owner: str = runner.owner) -> RoundResult:
            result = step()
            compacted[owner] += result.compacted
            return result

        runner.step = recorded  # type: ignore[method-assign]
    stop = threading.Event()
    threads = [threading.Thread(target=runner.run, args=(stop,)) for runner in runners]
    for thread in threads:
        thread.start()
    sim = TableSim(shards=("shardId-00000001-aaaa", "shardId-00000002-bbbb"), seed=20)
    sim.random_history(users=30, operations=500)
    handler = LakeHandler(lake, LakeSettings(flush_rows=10))
    quarter = len(sim.events) // 4 + 1
    try:
        for first in range(0, len(sim.events), quarter):
            for event in sim.events[first : first + quarter]:
                handler.add(event)
            handler.flush()
            time.sleep(0.5)  # the runners look meanwhile
    finally:
        stop.set()
        for thread in threads:
            thread.join(120)
    compacting = [owner for owner, tables in compacted.items() if CHANGES in tables]
    assert len(compacting) == 1  # one leader did every round
    assert compacted[compacting[0]].count(CHANGES) == _optimize_commits(lake) >= 1
    assert _rows_and_identities(lake) == (len(sim.events), len(sim.events))

"""Replays, crashes, moved batch boundaries and compactions (crashed ones too): every event appears
exactly once in the views, and snapshots equal a naive replay of the log."""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from unittest import mock

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from analytics.lake import LakeHandler, LakeMissing, open_lake
from analytics.lake import _commits as commits_module
from analytics.lake import compaction as compaction_module
from analytics.lake._high_water import Plan as HighWaterPlan
from analytics.lake.compaction import compact
from analytics.lake.snapshots import read_snapshot, snapshot, state_as_of
from analytics.lake.views import connect
from config import LakeSettings
from pipeline.events import StreamEvent
from tests.analytics.lakesim import TableSim, replay, state_rows

_HISTORIES: dict[int, TableSim] = {}


def _history(seed: int) -> TableSim:
    if seed not in _HISTORIES:
        sim = TableSim(shards=("shardId-00000001-aaaa", "shardId-00000002-bbbb"), seed=seed)
        sim.random_history(users=12, operations=160)
        _HISTORIES[seed] = sim
    return _HISTORIES[seed]


@dataclass(frozen=True)
class Plan:
    seed: int
    flush_rows: tuple[int, ...]  # per consumer run: batch boundaries move after a restart
    commit_every: int
    crashes: tuple[int, ...]  # event indexes at which the consumer dies with unflushed work
    zombie: bool  # the first run's handler flushes late, after its successor wrote the same events
    compact_at: tuple[int, ...]
    crash_compaction: bool
    snapshot_at: tuple[int, ...]


plans = st.builds(
    Plan,
    seed=st.sampled_from([1, 2, 3]),
    flush_rows=st.lists(st.integers(3, 40), min_size=4, max_size=4).map(tuple),
    commit_every=st.integers(5, 70),
    crashes=st.lists(st.integers(0, 300), max_size=3).map(lambda xs: tuple(sorted(set(xs)))),
    zombie=st.booleans(),
    compact_at=st.lists(st.integers(0, 300), max_size=2).map(lambda xs: tuple(sorted(set(xs)))),
    crash_compaction=st.booleans(),
    snapshot_at=st.lists(st.integers(0, 300), max_size=3).map(lambda xs: tuple(sorted(set(xs)))),
)


def _compact(lake: object, crash: bool) -> None:
    if not crash:
        compact(lake, small_file_bytes=10**9)  # type: ignore[arg-type]
        return
    # Die right after the first commit (a dedupe of a partition, or the OPTIMIZE), before the rest.
    with (
        mock.patch.object(compaction_module, "restrict_commit", side_effect=RuntimeError("killed")),
        mock.patch.object(compaction_module, "append", side_effect=RuntimeError("killed")),
        contextlib.suppress(RuntimeError),
    ):
        compact(lake, small_file_bytes=10**9)  # type: ignore[arg-type]


def _run(plan: Plan, events: list[StreamEvent], root: str) -> object:
    lake = open_lake(root)
    checkpoint = 0
    run = 0
    position = 0
    zombie: LakeHandler | None = None
    crashes = list(plan.crashes)
    flushed = False
    while position < len(events) or checkpoint < len(events):
        handler = LakeHandler(lake, LakeSettings(flush_rows=plan.flush_rows[run % len(plan.flush_rows)]))
        run += 1
        position = checkpoint  # a new consumer resumes from the checkpoint: everything after is replayed
        crashed = False
        while position < len(events):
            handler.add(events[position])
            position += 1
            if crashes and position >= crashes[0]:
                crashes.pop(0)
                if plan.zombie and zombie is None:
                    zombie = handler  # it keeps its buffer and will flush late
                crashed = True
                break
            if position in plan.compact_at:
                _compact(lake, plan.crash_compaction)
            if position in plan.snapshot_at:
                try:
                    snapshot(lake)
                except LakeMissing:
                    assert not flushed  # a snapshot refuses a lake only before anything landed
            if position % plan.commit_every == 0 or position == len(events):
                handler.flush()
                flushed = True
                checkpoint = position
        if not crashed:
            break
    if zombie is not None:
        zombie.flush()
    return lake


_HARD = Plan(
    seed=2,
    flush_rows=(7, 13, 5, 29),
    commit_every=23,
    crashes=(40, 95, 170),
    zombie=True,
    compact_at=(60, 150),
    crash_compaction=True,
    snapshot_at=(30, 61, 151, 200),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans)
@example(plan=_HARD)
def test_every_event_is_in_the_views_exactly_once_whatever_is_replayed(plan: Plan) -> None:
    events = _history(plan.seed).events
    with tempfile.TemporaryDirectory() as root:
        lake = _run(plan, events, root)
        con = connect(lake)  # type: ignore[arg-type]
        identities = con.execute(
            "SELECT stream_arn, shard_id, sequence_number, count(*) OVER (PARTITION BY event_id) FROM changes"
        ).fetchall()
        expected = {(e.position.stream_arn, e.position.shard_id, e.position.sequence_number) for e in events}
        assert len(identities) == len(events)
        assert {row[:3] for row in identities} == expected
        assert all(row[3] == 1 for row in identities)
        current = con.sql("SELECT * FROM current_items").to_arrow_table()
        assert state_rows(current) == replay(events)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, cut=st.floats(0, 1))
@example(plan=_HARD, cut=0.5)
def test_snapshots_equal_a_replay_of_the_log_now_and_as_of_any_instant(plan: Plan, cut: float) -> None:
    events = _history(plan.seed).events
    with tempfile.TemporaryDirectory() as root:
        lake = _run(plan, events, root)
        snapshot(lake)  # type: ignore[arg-type]
        assert state_rows(read_snapshot(lake)) == replay(events)  # type: ignore[arg-type]
        instant = events[min(int(cut * len(events)), len(events) - 1)].created_at
        assert state_rows(state_as_of(lake, instant)) == replay(events, as_of=instant)  # type: ignore[arg-type]


def test_a_compaction_that_died_midway_leaves_every_event_once_and_the_next_finishes() -> None:
    events = _history(1).events
    with tempfile.TemporaryDirectory() as root:
        lake = open_lake(root)
        # A replay landed without the high-water marks' plan (as before they were kept): duplicates
        # for the compaction to remove.
        unplanned = mock.patch.object(
            commits_module, "plan_changes", lambda _table, data, **_: HighWaterPlan(data)
        )
        for flush_rows in (10, 17):
            handler = LakeHandler(lake, LakeSettings(flush_rows=flush_rows))
            for event in events:
                handler.add(event)
            with unplanned:
                handler.flush()
        _compact(lake, crash=True)
        con = connect(lake)
        assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(events),)]
        result = compact(lake, small_file_bytes=10**9)
        assert sum(result.duplicates_dropped.values()) > 0
        con = connect(lake)
        assert con.execute("SELECT count(*) FROM raw_changes").fetchall() == [(len(events),)]

"""analytics/lake/snapshots.py: incremental snapshots fold only new changes and equal a full rebuild."""

from __future__ import annotations

import importlib
from unittest import mock

import pytest

from analytics.lake import Lake, LakeHandler
from analytics.lake._delta import open_table
from analytics.lake.compaction import compact
from analytics.lake.snapshots import (
    read_snapshot,
    snapshot,
    snapshot_as_of,
    snapshot_info,
    state_as_of,
    state_at_version,
)
from config import LakeSettings
from tests.analytics.lake.delta_files import data_files
from tests.analytics.lakesim import TableSim, replay, state_rows

# The package exports a function named `snapshot`, which hides the module of the same name.
snapshot_module = importlib.import_module("analytics.lake.snapshots")


def _land(lake: Lake, events: list, flush_rows: int = 20) -> None:  # type: ignore[type-arg]
    handler = LakeHandler(lake, LakeSettings(flush_rows=flush_rows))
    for event in events:
        handler.add(event)
    handler.flush()


def test_the_first_snapshot_folds_the_whole_log(lake: Lake, history: TableSim) -> None:
    _land(lake, history.events)
    result = snapshot(lake)
    assert result.full and result.version is not None
    assert result.rows_read == len(history.events)
    assert state_rows(read_snapshot(lake)) == replay(history.events)


def test_an_incremental_snapshot_reads_only_the_files_it_has_not_folded(
    lake: Lake, history: TableSim
) -> None:
    half = len(history.events) // 2
    _land(lake, history.events[:half])
    snapshot(lake)
    before = set(data_files(lake, "changes"))
    _land(lake, history.events[half:])
    new_files = set(data_files(lake, "changes")) - before
    result = snapshot(lake)
    assert not result.full
    assert result.files_read == len(new_files)
    assert result.rows_read == len(history.events) - half
    assert state_rows(read_snapshot(lake)) == replay(history.events)


def test_a_snapshot_with_nothing_new_writes_nothing(lake: Lake, history: TableSim) -> None:
    _land(lake, history.events)
    snapshot(lake)
    result = snapshot(lake)
    assert result.files_read == 0 and result.path is None
    assert state_rows(read_snapshot(lake)) == replay(history.events)


def test_incremental_equals_full_rebuild(lake: Lake, history: TableSim) -> None:
    step = len(history.events) // 5
    for start in range(0, len(history.events), step):
        _land(lake, history.events[start : start + step])
        snapshot(lake, consolidate_ratio=10.0, max_deltas=100)
    incremental = state_rows(read_snapshot(lake))
    assert snapshot_info(lake).deltas >= 2  # type: ignore[union-attr]
    snapshot(lake, full=True)
    assert state_rows(read_snapshot(lake)) == incremental == replay(history.events)


def test_deltas_are_consolidated_into_a_new_base_past_the_ratio(lake: Lake, history: TableSim) -> None:
    half = len(history.events) // 2
    _land(lake, history.events[:half])
    snapshot(lake)
    _land(lake, history.events[half:])
    result = snapshot(lake, consolidate_ratio=0.01)
    info = snapshot_info(lake)
    assert result.consolidated
    assert info is not None and info.deltas == 0 and info.delta_rows == 0
    assert state_rows(read_snapshot(lake)) == replay(history.events)


def test_a_compacted_file_whose_inputs_were_folded_is_not_read_again(lake: Lake, history: TableSim) -> None:
    _land(lake, history.events, flush_rows=10)
    snapshot(lake)
    compact(lake, small_file_bytes=10**9)
    result = snapshot(lake)
    assert result.files_read == 0 and result.files_skipped_by_lineage > 0
    assert state_rows(read_snapshot(lake)) == replay(history.events)


def test_a_replayed_old_insert_cannot_bring_back_a_removed_item(lake: Lake) -> None:
    sim = TableSim(seed=11)
    sim.signup("u1", "a1")
    sim.cancel("u1")
    sim.reactivate("u1")  # deletes the cancellation record
    _land(lake, sim.events)
    snapshot(lake)
    scheduled = next(e for e in sim.events if e.event_type == "cleanup.scheduled")
    _land(lake, [scheduled])  # a replay, in a file of its own
    snapshot(lake)
    items = state_rows(read_snapshot(lake))
    assert ("USER#u1", "CLEANUP#CANCELLATION") not in items
    assert items == replay(sim.events)


def test_removed_items_are_gone_but_kept_as_tombstones(lake: Lake, history: TableSim) -> None:
    _land(lake, history.events)
    snapshot(lake)
    live = read_snapshot(lake)
    everything = read_snapshot(lake, include_deleted=True)
    removed = {(str(e.keys["pk"]), str(e.keys["sk"])) for e in history.events if e.change == "REMOVE"}
    removed -= set(replay(history.events))
    assert removed
    assert not removed & set(state_rows(live))
    assert removed <= {(r["pk"], r["sk"]) for r in everything.to_pylist() if r["deleted"]}


def test_a_run_that_died_before_its_commit_leaves_the_previous_snapshot(
    lake: Lake, history: TableSim
) -> None:
    half = len(history.events) // 2
    _land(lake, history.events[:half])
    snapshot(lake)
    _land(lake, history.events[half:])
    with (
        mock.patch.object(snapshot_module, "append", side_effect=OSError("killed")),
        pytest.raises(OSError),
    ):
        snapshot(lake)
    assert state_rows(read_snapshot(lake)) == replay(history.events[:half])
    snapshot(lake)
    assert state_rows(read_snapshot(lake)) == replay(history.events)


def test_time_travel_gives_the_state_at_a_version_of_the_change_table(lake: Lake, history: TableSim) -> None:
    half = len(history.events) // 2
    _land(lake, history.events[:half])
    table = open_table(lake, "changes")
    assert table is not None
    version = int(table.version())
    _land(lake, history.events[half:])
    assert state_rows(state_at_version(lake, version)) == replay(history.events[:half])


def test_as_of_equals_a_replay_to_that_instant_before_and_after_a_snapshot(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history.events)
    instants = [history.events[i].created_at for i in (0, 50, len(history.events) // 2, -1)]
    for instant in instants:
        assert state_rows(state_as_of(lake, instant)) == replay(history.events, as_of=instant)
    snapshot(lake)
    for instant in instants:
        assert state_rows(state_as_of(lake, instant)) == replay(history.events, as_of=instant)


def test_as_of_after_the_snapshot_adds_the_unfolded_changes(lake: Lake, history: TableSim) -> None:
    half = len(history.events) // 2
    _land(lake, history.events[:half])
    snapshot(lake)
    _land(lake, history.events[half:])
    instant = history.events[half + 10].created_at
    assert state_rows(state_as_of(lake, instant)) == replay(history.events, as_of=instant)


def test_snapshot_as_of_writes_a_state_file_and_leaves_the_current_snapshot(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history.events)
    snapshot(lake)
    info = snapshot_info(lake)
    instant = history.events[100].created_at
    result = snapshot_as_of(lake, instant)
    assert result.path == "snapshots/as_of"
    as_of = open_table(lake, "snapshots/as_of")
    assert as_of is not None
    assert state_rows(as_of.to_pyarrow_table()) == replay(history.events, as_of=instant)
    assert snapshot_info(lake) == info

"""The per-shard high-water marks the landing carries in each commit (analytics/lake/_high_water.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError

from analytics.lake import CHANGES, Lake, LakeHandler, _high_water
from analytics.lake._delta import append, expunge, open_table
from analytics.lake._high_water import MarkCache, app_ids, high_water, mark_transactions, plan_changes
from analytics.lake._rows import ChangeBuffer
from analytics.lake._schema import PARTITION_COLUMN, default_allow_list
from analytics.lake.compaction import compact
from config import LakeSettings
from pipeline.events import StreamEvent, sortable_sequence
from tests.analytics.lakesim import TableSim


def _one_shard() -> list[StreamEvent]:
    sim = TableSim(shards=("shardId-00000001-aaaa",), seed=3)
    sim.random_history(users=6, operations=60)
    return sim.events


def _land(lake: Lake, events: list[StreamEvent], flush_rows: int = 1000) -> LakeHandler:
    handler = LakeHandler(lake, LakeSettings(flush_rows=flush_rows))
    for event in events:
        handler.add(event)
    handler.flush()
    return handler


def _mark(lake: Lake, event: StreamEvent) -> str | None:
    table = open_table(lake, CHANGES)
    assert table is not None
    return high_water(table, event.position.stream_arn, event.position.shard_id)


def _rows(lake: Lake) -> int:
    table = open_table(lake, CHANGES)
    assert table is not None
    return int(table.to_pyarrow_table(columns=["sequence_key"]).num_rows)


def test_a_forty_digit_sequence_number_round_trips_through_three_app_ids(tmp_path: object) -> None:
    key = sortable_sequence("9" * 40)
    actions = mark_transactions({("arn:stream", "shardId-1"): key})
    assert [a.app_id for a in actions] == list(app_ids("arn:stream", "shardId-1"))
    assert all(0 <= a.version < 2**63 for a in actions)
    path = str(tmp_path)
    write_deltalake(path, pa.table({"a": [1]}), commit_properties=CommitProperties(app_transactions=actions))
    assert high_water(DeltaTable(path), "arn:stream", "shardId-1") == key


def test_each_commit_sets_its_shards_mark_to_the_highest_key_landed(lake: Lake) -> None:
    events = _one_shard()
    _land(lake, events[:20])
    assert _mark(lake, events[0]) == max(sortable_sequence(e.position.sequence_number) for e in events[:20])


def test_the_mark_survives_a_compaction_and_an_expunge_of_the_log(lake: Lake) -> None:
    events = _one_shard()
    for start in range(0, 40, 10):
        _land(lake, events[start : start + 10])
    before = _mark(lake, events[0])
    compact(lake, small_file_bytes=10**9)
    expunge(lake, CHANGES)  # a checkpoint, then every log entry before it deleted
    assert _mark(lake, events[0]) == before
    handler = _land(lake, events[:40])  # a replay after it all
    assert handler.stats.replays_dropped == 40
    assert _rows(lake) == 40


def test_a_replay_at_or_below_the_mark_is_dropped_and_what_follows_it_lands(lake: Lake) -> None:
    events = _one_shard()
    _land(lake, events[:30])
    handler = _land(lake, events[10:50], flush_rows=7)  # a restart from an older checkpoint
    assert handler.stats.replays_dropped == 20
    assert _rows(lake) == 50


def test_records_below_the_mark_missing_from_the_table_are_written_not_dropped(lake: Lake) -> None:
    events = _one_shard()
    _land(lake, events[:10])
    _land(lake, events[20:30])  # events 10..19 were parked: below the mark, not in the table
    handler = _land(lake, events[10:20])  # their replay from the parked batch
    assert handler.stats.replays_dropped == 0
    assert _rows(lake) == 30


def _data(events: list[StreamEvent]) -> pa.Table:
    buffer = ChangeBuffer(default_allow_list())
    for event in events:
        buffer.append(event)
    parts = [
        f.table.append_column(PARTITION_COLUMN, pa.array([f.day] * f.table.num_rows, pa.date32()))
        for f in buffer.files()
    ]
    return pa.concat_tables(parts)


def test_a_zombie_writer_planned_before_its_successor_committed_the_shard_plans_again(lake: Lake) -> None:
    events = _one_shard()
    _land(lake, events[:5])
    zombie = open_table(lake, CHANGES)  # read before the successor's commit
    assert zombie is not None
    _land(lake, events[:30])  # the successor, after the lease moved
    data = _data(events[:30])
    plans = []

    def prepare(current: DeltaTable) -> tuple[pa.Table, list[Transaction]]:
        plan = plan_changes(current, data)
        plans.append(plan)
        return plan.data, plan.transactions

    append(lake, zombie, CHANGES, data, partition_by=(PARTITION_COLUMN,), prepare=prepare)
    assert len(plans) == 2  # the first plan's commit lost delta-rs's txn conflict check
    assert plans[0].data.num_rows == 25 and plans[-1].data.num_rows == 0
    assert _rows(lake) == 30


def test_delta_rs_refuses_a_commit_whose_app_id_a_concurrent_commit_set(tmp_path: object) -> None:
    # What the landing relies on (delta-rs 1.6.6): a stale writer carrying a `txn` of the same
    # application id as a commit since its read version fails instead of being retried.
    path = str(tmp_path)
    write_deltalake(path, pa.table({"a": [1]}))
    stale = DeltaTable(path)
    txn = CommitProperties(app_transactions=[Transaction("shard#0", 1)])
    write_deltalake(path, pa.table({"a": [2]}), mode="append", commit_properties=txn)
    with pytest.raises(CommitFailedError):
        write_deltalake(stale, pa.table({"a": [2]}), mode="append", commit_properties=txn)
    other = CommitProperties(app_transactions=[Transaction("other#0", 1)])
    stale = DeltaTable(path, version=0)
    write_deltalake(stale, pa.table({"a": [3]}), mode="append", commit_properties=other)
    assert DeltaTable(path).version() == 2


# -- MarkCache: a writer's marks kept between its commits ------------------------------------------


def _cached(lake: Lake) -> tuple[MarkCache, DeltaTable]:
    table = open_table(lake, CHANGES)
    assert table is not None
    return MarkCache(lake, CHANGES), table


def test_a_cached_mark_is_read_from_the_table_once_over_many_commits(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real = _high_water.high_water

    def counted(table: DeltaTable, stream_arn: str, shard_id: str) -> str | None:
        reads.append(shard_id)
        return real(table, stream_arn, shard_id)

    monkeypatch.setattr(_high_water, "high_water", counted)
    events = _one_shard()
    handler = _land(lake, events[:10])
    for start in range(10, 60, 10):
        for event in events[start : start + 10]:
            handler.add(event)
        handler.flush()
    assert len(reads) == 1
    assert _rows(lake) == 60


def test_the_cache_answers_the_mark_another_writer_moved(lake: Lake) -> None:
    events = _one_shard()
    _land(lake, events[:20])
    cache, table = _cached(lake)
    position = events[0].position
    assert cache.high_water(table, position.stream_arn, position.shard_id) == _mark(lake, events[19])
    _land(lake, events[20:40])  # another writer (the shard's new owner) moves the mark
    _, table = _cached(lake)
    assert cache.high_water(table, position.stream_arn, position.shard_id) == _mark(lake, events[39])
    assert cache.reads == 1  # the move was read from the log entry between, not from the snapshot


def test_a_zombie_writers_replay_after_the_successors_commits_lands_nothing_twice(lake: Lake) -> None:
    events = _one_shard()
    zombie = _land(lake, events[:20])
    _land(lake, events[20:50])  # the successor lands further
    for event in events[20:50]:  # the zombie replays what the successor landed
        zombie.add(event)
    zombie.flush()
    assert _rows(lake) == 50


def test_the_cache_reads_afresh_when_a_log_entry_between_is_gone(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _one_shard()
    _land(lake, events[:20])
    cache, table = _cached(lake)
    position = events[0].position
    cache.high_water(table, position.stream_arn, position.shard_id)
    _land(lake, events[20:40])
    monkeypatch.setattr(_high_water, "commits_since", lambda *_args: None)  # an erasure cleaned the log
    _, table = _cached(lake)
    assert cache.high_water(table, position.stream_arn, position.shard_id) == _mark(lake, events[39])
    assert cache.reads == 2

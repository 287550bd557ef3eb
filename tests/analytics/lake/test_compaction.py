"""analytics/lake/compaction.py: small files merge into one per partition, exactly once, no column lost."""

from __future__ import annotations

import json
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.lake import CHANGES, OUTCOMES, Lake, LakeHandler, compact
from analytics.lake._files import COMPACTED_FROM_KEY, list_parquet, write_parquet_atomic
from analytics.views import connect
from schema.outcomes import OutcomeKind
from tests.analytics.lakesim import TableSim, final_outcome, land

_land = partial(land, flush_rows=10)


def test_small_files_merge_into_one_file_per_partition(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    before = list_parquet(lake, CHANGES)
    partitions = {f.directory for f in before}
    result = compact(lake, small_file_bytes=10**9)
    after = list_parquet(lake, CHANGES)
    assert len(after) == len(partitions) < len(before)
    assert result.files_merged[CHANGES] == len(before)
    assert all(f.name.startswith("compacted_") for f in after)


def test_compaction_removes_duplicates_and_keeps_every_event(lake: Lake, history: TableSim) -> None:
    _land(lake, history, flush_rows=10)
    _land(lake, history, flush_rows=17)  # a replay with other batch boundaries
    raw = connect(lake).execute("SELECT count(*) FROM raw_changes").fetchall()[0][0]
    assert raw > len(history.events)
    result = compact(lake, small_file_bytes=10**9)
    assert result.duplicates_dropped[CHANGES] == raw - len(history.events)
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM raw_changes").fetchall() == [(len(history.events),)]
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(history.events),)]


def test_outcomes_are_compacted_on_their_identity(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    _land(lake, history)
    compact(lake, small_file_bytes=10**9)
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM raw_outcomes").fetchall() == [(len(history.outcomes),)]


def test_a_compacted_file_records_its_lineage(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    before = {f.path for f in list_parquet(lake, CHANGES)}
    compact(lake, small_file_bytes=10**9)
    lineage: set[str] = set()
    for entry in list_parquet(lake, CHANGES):
        raw = pq.read_schema(lake.path(entry.path)).metadata[COMPACTED_FROM_KEY]
        lineage |= {node["path"] for node in json.loads(raw)}
    assert lineage == before


def test_large_files_are_left_alone(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    before = list_parquet(lake, CHANGES)
    result = compact(lake, small_file_bytes=1)
    assert list_parquet(lake, CHANGES) == before
    assert not result.files_written.get(CHANGES)


def test_columns_of_older_schemas_survive_compaction(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    entry = list_parquet(lake, CHANGES)[0]
    table = pq.read_table(lake.path(entry.path))
    older = table.append_column("new_retired_attribute", pa.array(["kept"] * table.num_rows))
    write_parquet_atomic(lake, entry.path, older, older.schema)
    compact(lake, small_file_bytes=10**9)
    con = connect(lake)
    kept = con.execute("SELECT count(*) FROM changes WHERE new_retired_attribute = 'kept'").fetchall()
    assert kept == [(table.num_rows,)]
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(history.events),)]


def test_nothing_to_do_on_an_empty_lake(lake: Lake) -> None:
    result = compact(lake)
    assert not any(result.files_written.values())
    assert list_parquet(lake, OUTCOMES) == []


def test_compaction_keeps_the_preferred_of_two_final_outcomes_of_one_expiry(lake: Lake) -> None:
    for outcome in (
        final_outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, minute=0, attempt=1),
        final_outcome(OutcomeKind.CLEANUP_DELETED, minute=5),
    ):
        handler = LakeHandler(lake)
        handler.add_outcome(outcome)
        handler.flush()
    result = compact(lake, datasets=(OUTCOMES,), small_file_bytes=10**9)
    assert result.duplicates_dropped[OUTCOMES] == 1
    con = connect(lake, views=["raw_outcomes"])
    assert con.execute("SELECT kind FROM raw_outcomes").fetchall() == [("cleanup.deleted",)]

"""analytics/lake/purge.py: after a purge, no byte of any file of the lake names an erased user: data files,
the Delta logs, checkpoints, files removed by earlier rewrites; and the other users are intact."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.lake import Lake, LakeHandler, compact, purge_users, snapshot, snapshot_as_of
from analytics.views import connect
from config import LakeSettings
from tests.analytics.lakesim import TableSim

ERASED = "u001"


def _land(lake: Lake, sim: TableSim, flush_rows: int) -> None:
    handler = LakeHandler(lake, LakeSettings(flush_rows=flush_rows))
    for event in sim.events:
        handler.add(event)
    for outcome in sim.outcomes:
        handler.add_outcome(outcome)
    handler.flush()


def _files_naming(lake: Lake, needle: str) -> list[str]:
    """Every file under the lake whose bytes, or whose Parquet content written out uncompressed, hold
    `needle`."""
    found = []
    for folder, _, names in os.walk(lake.base):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                raw = handle.read()
            held = needle.encode() in raw
            if not held and raw[:4] == b"PAR1":
                sink = pa.BufferOutputStream()
                pq.write_table(pq.read_table(path), sink, compression="none")
                held = needle.encode() in sink.getvalue().to_pybytes()
            if held:
                found.append(os.path.relpath(path, lake.base))
    return found


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

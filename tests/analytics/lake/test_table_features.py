"""analytics/lake/_schema.py PORTABLE_PROTOCOL: every lake table's Delta protocol stays inside what
delta-rs, DuckDB's delta extension, Polars, Spark 3.5 (delta-spark 3.3), Trino and Athena read."""

from __future__ import annotations

import re
from pathlib import Path

from deltalake import DeltaTable

from analytics.lake import CHANGES, Lake, LakeHandler, default_allow_list
from analytics.lake._delta import ensure_table, open_table
from analytics.lake._files import AS_OF_DIR, AUDIT_FAILURES_TABLE, TABLES, ensure_layout
from analytics.lake._schema import AUDIT_FAILURES, PORTABLE_PROTOCOL
from analytics.lake.compaction import compact
from analytics.lake.snapshots import snapshot, snapshot_as_of
from tests.analytics.lakesim import TableSim

REPO = Path(__file__).resolve().parents[3]


def _inside(table: DeltaTable) -> list[str]:
    """What of `table`'s protocol is outside the pinned one (empty when inside)."""
    protocol = table.protocol()
    pinned = PORTABLE_PROTOCOL
    outside = []
    if protocol.min_reader_version > pinned.max_reader_version:
        outside.append(f"reader version {protocol.min_reader_version}")
    if protocol.min_writer_version > pinned.max_writer_version:
        outside.append(f"writer version {protocol.min_writer_version}")
    outside += [f"reader feature {f}" for f in set(protocol.reader_features or ()) - pinned.reader_features]
    outside += [f"writer feature {f}" for f in set(protocol.writer_features or ()) - pinned.writer_features]
    return outside


def test_every_table_a_working_lake_holds_stays_inside_the_pinned_protocol(
    lake: Lake, history: TableSim
) -> None:
    handler = LakeHandler(lake)
    for event in history.events:
        handler.add(event)
    for outcome in history.outcomes:
        handler.add_outcome(outcome)
    handler.flush()
    snapshot(lake)
    snapshot_as_of(lake, history.events[100].created_at)
    ensure_table(lake, AUDIT_FAILURES, AUDIT_FAILURES_TABLE.schema(default_allow_list()))
    compact(lake)
    ensure_layout(lake, default_allow_list())  # describes every table: metadata commits too
    names = (*TABLES, AUDIT_FAILURES)
    tables = {name: open_table(lake, name) for name in names}
    assert all(t is not None for t in tables.values()), [n for n, t in tables.items() if t is None]
    assert {name: _inside(t) for name, t in tables.items() if t is not None} == {name: [] for name in names}
    assert AS_OF_DIR in tables and CHANGES in tables


def test_the_lake_doc_states_the_pinned_protocol() -> None:
    text = (REPO / "schema" / "lake.md").read_text(encoding="utf-8")
    section = text[text.index("### Table features") :]
    assert f"reader version {PORTABLE_PROTOCOL.max_reader_version}" in section
    assert f"writer version {PORTABLE_PROTOCOL.max_writer_version}" in section
    for feature in PORTABLE_PROTOCOL.writer_features:
        assert f"`{feature}`" in section
    assert re.search(r"https://trino\.io/.*delta-lake", section) and "docs.aws.amazon.com/athena" in section

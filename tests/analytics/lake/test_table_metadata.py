"""analytics/lake/_files.py, _schema.py, _meanings.py: every lake table's name, description and column
comments in its Delta metadata, from schema/lake.md; business times also as UTC timestamps."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import polars as pl
import pytest
from deltalake import DeltaTable

from analytics.lake import CHANGES, Lake, LakeHandler, default_allow_list
from analytics.lake._delta import ensure_table, open_table
from analytics.lake._duck import literal, load_delta_extension
from analytics.lake._files import AS_OF_DIR, AUDIT_FAILURES_TABLE, TABLES, ensure_layout
from analytics.lake._meanings import column_meaning, table_meanings
from analytics.lake._schema import AUDIT_FAILURES, STATE_DIR, parse_business_time
from tests.analytics.lakesim import TableSim

ALL_TABLES = (*TABLES, AUDIT_FAILURES)


def _all_tables(lake: Lake) -> dict[str, DeltaTable]:
    allow = default_allow_list()
    ensure_table(lake, AUDIT_FAILURES, AUDIT_FAILURES_TABLE.schema(allow))  # as `audit` made it, undescribed
    tables = ensure_layout(lake, allow)
    failures = open_table(lake, AUDIT_FAILURES)
    assert failures is not None
    return {**tables, AUDIT_FAILURES: failures}


def test_the_lake_doc_names_and_describes_every_table() -> None:
    assert set(table_meanings()) == set(ALL_TABLES)
    assert all(m.name and len(m.description) > 20 for m in table_meanings().values())


def test_every_table_carries_its_name_description_and_column_comments_from_the_lake_doc(lake: Lake) -> None:
    for name, table in _all_tables(lake).items():
        meaning = table_meanings()[name]
        metadata = table.metadata()
        assert (metadata.name, metadata.description) == (meaning.name, meaning.description), name
        for field in table.schema().fields:
            assert field.metadata.get("comment") == column_meaning(meaning.name, field.name), (
                name,
                field.name,
            )
            assert field.metadata["comment"], (name, field.name)


def test_a_table_made_before_the_words_gets_them_and_its_new_columns_when_a_writer_opens_it(
    lake: Lake,
) -> None:
    allow = default_allow_list()
    old = TABLES[CHANGES].schema(allow)
    old = old.remove(old.get_field_index("new_item_created_at_ts"))
    ensure_table(lake, CHANGES, old, TABLES[CHANGES].partition_by)
    before = open_table(lake, CHANGES)
    assert before is not None and before.metadata().name is None

    table = ensure_layout(lake, allow)[CHANGES]

    assert table.metadata().name == "changes"
    fields = {f.name: f for f in table.schema().fields}
    assert "new_item_created_at_ts" in fields
    assert all(f.metadata.get("comment") for f in fields.values())
    version = table.version()
    assert ensure_layout(lake, allow)[CHANGES].version() == version  # described once: no more commits


def test_landed_rows_keep_the_table_described_and_land_business_times_as_utc_timestamps(
    lake: Lake, history: TableSim
) -> None:
    handler = LakeHandler(lake)
    for event in history.events:
        handler.add(event)
    handler.flush()
    table = open_table(lake, CHANGES)
    assert table is not None and table.metadata().name == "changes"
    rows = table.to_pyarrow_table(columns=["new_item_created_at", "new_item_created_at_ts"]).to_pylist()
    texts = [r for r in rows if r["new_item_created_at"] is not None]
    assert texts and all(
        r["new_item_created_at_ts"] == datetime.fromisoformat(r["new_item_created_at"]).astimezone(UTC)
        for r in texts
    )


def test_other_readers_see_the_comments_and_the_timestamp_columns(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake)
    for event in history.events:
        handler.add(event)
    handler.flush()
    schema = pl.scan_delta(lake.table_uri(CHANGES)).collect_schema()
    assert schema["new_item_updated_at_ts"] == pl.Datetime("us", "UTC")
    con = duckdb.connect()
    load_delta_extension(con)
    kinds = {
        row[0]: row[1]
        for row in con.execute(f"DESCRIBE FROM delta_scan({literal(lake.table_uri(CHANGES))})").fetchall()
    }
    assert kinds["new_item_updated_at_ts"] == "TIMESTAMP WITH TIME ZONE"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-01T10:00:00.123Z", datetime(2026, 3, 1, 10, 0, 0, 123000, tzinfo=UTC)),
        ("2026-03-01T12:00:00+02:00", datetime(2026, 3, 1, 10, 0, tzinfo=UTC)),
        ("2026-03-01T10:00:00", None),  # no offset: names no instant
        ("2026-03-01", None),
        ("yesterday", None),
        ("0001-01-01T00:00:00+01:00", None),  # before the first representable instant
        (None, None),
    ],
)
def test_a_business_time_is_parsed_only_when_it_names_an_instant(
    text: str | None, expected: datetime | None
) -> None:
    assert parse_business_time(text) == expected


def test_the_snapshot_tables_hold_the_timestamp_twins_too() -> None:
    allow = default_allow_list()
    for name in (STATE_DIR, AS_OF_DIR):
        assert {"item_created_at_ts", "item_updated_at_ts"} <= set(TABLES[name].schema(allow).names)

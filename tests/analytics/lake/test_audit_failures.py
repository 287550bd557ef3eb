"""analytics/lake/audit_failures.py: the audit-failures table, made on its first append as the lake's
other tables are, one commit per run, and read back without the users the erasure mask holds. Which
findings become rows is the audits' (tests/analytics/audits/test_failures.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from analytics.lake import Lake
from analytics.lake._delta import open_table
from analytics.lake._meanings import column_meaning, table_meanings
from analytics.lake.audit_failures import AUDIT_FAILURES_SCHEMA, append_failures, read_failures
from analytics.lake.eraser import AnalyticsLakeEraser
from analytics.lake.purge import AUDIT_FAILURES, PURGED_DATASETS


def _rows(audit_id: str, *named: tuple[str | None, str | None, str | None]) -> pa.Table:
    """One run's rows, one for each (user_id, other_user_id, pk)."""
    return pa.Table.from_pylist(
        [
            {
                "audit_id": audit_id,
                "audited_at": datetime(2026, 1, 2, tzinfo=UTC),
                "as_of": None,
                "check_name": "duplicate_active_rows",
                "scope": "now",
                "status": "error",
                "row_number": number,
                "user_id": user,
                "other_user_id": other,
                "pk": pk,
                "row": "{}",
            }
            for number, (user, other, pk) in enumerate(named)
        ],
        schema=AUDIT_FAILURES_SCHEMA,
    )


def _whose(rows: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((r["audit_id"], r["user_id"], r["other_user_id"], r["pk"]) for r in rows.to_pylist())


def test_the_table_a_first_append_makes_carries_its_name_description_and_column_comments(lake: Lake) -> None:
    append_failures(lake, _rows("a1", ("mallory", None, None)), audit_id="a1")

    table = open_table(lake, AUDIT_FAILURES)
    assert table is not None
    meaning = table_meanings()[AUDIT_FAILURES]
    assert (table.metadata().name, table.metadata().description) == (meaning.name, meaning.description)
    comments = {field.name: field.metadata.get("comment") for field in table.schema().fields}
    assert comments == {name: column_meaning(meaning.name, name) for name in AUDIT_FAILURES_SCHEMA.names}
    assert all(comments.values())


def test_each_append_is_one_commit_carrying_the_runs_id(lake: Lake) -> None:
    first = append_failures(lake, _rows("a1", ("u1", None, None), ("u2", None, None)), audit_id="a1")
    second = append_failures(lake, _rows("a2", ("u3", None, None)), audit_id="a2")

    table = open_table(lake, AUDIT_FAILURES)
    assert table is not None
    assert second == first + 1 == table.version()
    assert table.history(1)[0].get("audit_id") == "a2"


def test_reading_before_any_append_is_an_empty_table_of_the_schema(lake: Lake) -> None:
    rows = read_failures(lake)
    assert (rows.num_rows, rows.schema) == (0, AUDIT_FAILURES_SCHEMA)


def test_reading_one_run_gives_only_that_runs_rows(lake: Lake) -> None:
    append_failures(lake, _rows("a1", ("u1", None, None)), audit_id="a1")
    append_failures(lake, _rows("a2", ("u2", None, None)), audit_id="a2")
    assert _whose(read_failures(lake, audit_id="a2")) == [("a2", "u2", None, None)]
    assert _whose(read_failures(lake)) == [("a1", "u1", None, None), ("a2", "u2", None, None)]


def test_reading_hides_a_masked_user_named_as_the_user_the_other_user_or_the_pk(lake: Lake) -> None:
    append_failures(
        lake,
        _rows(
            "a1",
            ("mallory", None, None),
            ("frank", "alice", "USER#frank"),
            (None, None, "USER#bob"),
            ("carol", None, "USER#carol"),
        ),
        audit_id="a1",
    )
    AnalyticsLakeEraser(lake).mask(["mallory", "alice", "bob"])
    assert _whose(read_failures(lake)) == [("a1", "carol", None, "USER#carol")]


def test_the_table_is_a_dataset_the_erasure_purges() -> None:
    assert AUDIT_FAILURES in PURGED_DATASETS

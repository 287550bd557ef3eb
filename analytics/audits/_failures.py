"""Stored failures: every row of each failing check (warn or error) kept in the lake, for whoever has to
act on them after the report is gone (`entitlements audit --store-failures`).

One Delta table, `audits/failures` under the lake root (`analytics.lake.purge.AUDIT_FAILURES`), one commit
per audit run. Checks return different columns, so a stored row is the finding as JSON (`row`, the
check's columns and values as the JSON report gives them) beside the columns that say whose it is:

    audit_id       the run (also in the report's `stored_failures`)
    audited_at     when the run was made (the report's generated_at)
    as_of          the run's --as-of, NULL for "now"
    check_name, scope, status, row_number
    user_id        the finding's user (its `user_id` column)
    other_user_id  another user the finding names (`row_user_id`: the user whose Active row uses the
                   account a cleanup record names), else NULL
    pk             the finding's partition key (`USER#<id>`), else NULL
    row            the whole finding, as JSON text

The lake's privacy covers it as it covers the other tables: an erasure's purge deletes every stored row
naming the user in `user_id`, `other_user_id` or `pk` and expunges the table's log, the holdings check
scans those columns, and `read_failures` hides the users the erasure mask holds (their rows cannot be
stored meanwhile: the checks read views that already hide them); so does the view `audit_failures`
(analytics/sql/70_audit_failures.sql), which `entitlements sql` queries.
"""

from __future__ import annotations

__all__ = ["FAILURES_SCHEMA", "read_failures", "store_failures"]

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from analytics.lake import Lake
from analytics.lake._delta import append, ensure_table, open_table
from analytics.lake._files import AUDIT_FAILURES_TABLE
from analytics.lake._mask import read_mask
from analytics.lake._schema import AUDIT_FAILURES_SCHEMA, with_comments
from analytics.lake.purge import AUDIT_FAILURES
from schema.table import USER_PK_PREFIX

FAILURES_SCHEMA = AUDIT_FAILURES_SCHEMA
_OTHER_USER_COLUMNS = ("row_user_id",)


@dataclass(frozen=True, slots=True)
class FailingRows:
    """One failing check's rows, as the JSON report gives their values."""

    check_name: str
    scope: str
    status: str
    rows: Sequence[dict[str, Any]]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _other_user(row: dict[str, Any]) -> str | None:
    for column in _OTHER_USER_COLUMNS:
        other = row.get(column)
        if other is not None and other != row.get("user_id"):
            return str(other)
    return None


def store_failures(
    lake: Lake,
    failing: Iterable[FailingRows],
    *,
    audit_id: str,
    audited_at: datetime,
    as_of: datetime | None,
) -> tuple[int, int]:
    """Append every failing check's rows to the lake's `audits/failures` table in one commit (creating
    the table on first use). Returns (the version committed, rows stored); (-1, 0) when nothing failed,
    and then nothing is written."""
    columns: dict[str, list[Any]] = {field.name: [] for field in FAILURES_SCHEMA}
    for check in failing:
        for number, row in enumerate(check.rows):
            columns["audit_id"].append(audit_id)
            columns["audited_at"].append(audited_at.astimezone(UTC))
            columns["as_of"].append(as_of.astimezone(UTC) if as_of is not None else None)
            columns["check_name"].append(check.check_name)
            columns["scope"].append(check.scope)
            columns["status"].append(check.status)
            columns["row_number"].append(number)
            columns["user_id"].append(_text(row.get("user_id")))
            columns["other_user_id"].append(_other_user(row))
            columns["pk"].append(_text(row.get("pk")))
            columns["row"].append(json.dumps(row, ensure_ascii=False, separators=(",", ":"), default=str))
    stored = len(columns["audit_id"])
    if not stored:
        return -1, 0
    data = pa.Table.from_pydict(columns, schema=FAILURES_SCHEMA)
    # Made as the lake's other tables are: its Delta name, description and column comments from
    # schema/lake.md, for outside readers (the landed rows carry none: delta-rs compares field metadata).
    meaning = AUDIT_FAILURES_TABLE.meaning
    table = ensure_table(
        lake,
        AUDIT_FAILURES,
        with_comments(FAILURES_SCHEMA, meaning.name),
        table_name=meaning.name,
        description=meaning.description,
    )
    version = append(lake, table, AUDIT_FAILURES, data, custom_metadata={"audit_id": audit_id})
    return version, stored


def read_failures(lake: Lake, *, audit_id: str | None = None) -> pa.Table:
    """The stored failures (of one run, or all), without the rows of any user the erasure mask holds.
    An empty table when none were ever stored."""
    table = open_table(lake, AUDIT_FAILURES)
    if table is None:
        return FAILURES_SCHEMA.empty_table()
    rows = table.to_pyarrow_table()
    if audit_id is not None:
        rows = rows.filter(pc.equal(rows["audit_id"], audit_id))
    masked = read_mask(lake)
    if masked and rows.num_rows:
        ids = pa.array(sorted(masked), pa.string())
        pks = pa.array(sorted(f"{USER_PK_PREFIX}{user}" for user in masked), pa.string())
        hidden = pc.or_kleene(
            pc.or_kleene(pc.is_in(rows["user_id"], ids), pc.is_in(rows["other_user_id"], ids)),
            pc.is_in(rows["pk"], pks),
        )
        rows = rows.filter(pc.invert(pc.fill_null(hidden, False)))
    return rows.select(FAILURES_SCHEMA.names).cast(FAILURES_SCHEMA)

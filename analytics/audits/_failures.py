"""Stored failures: every row of each failing check (warn or error) kept in the lake, for whoever has to
act on them after the report is gone (`entitlements audit --store-failures`).

Here is which findings become rows and what each row says: a failing check's every row, the finding as
JSON (`row`, the check's columns and values as the JSON report gives them) beside the columns that say
whose it is (`user_id`; `other_user_id` from `row_user_id`, the user whose Active row uses the account a
cleanup record names; `pk`). The table itself, `audits/failures` under the lake root, its columns, one
commit per audit run, its reading back (`read_failures`, which hides the users the erasure mask holds) and
the erasure's reach into it are the lake's: `analytics.lake.audit_failures`.
"""

from __future__ import annotations

__all__ = ["FailingRows", "store_failures"]

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from analytics.lake import Lake
from analytics.lake.audit_failures import AUDIT_FAILURES_SCHEMA, append_failures

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
    columns: dict[str, list[Any]] = {field.name: [] for field in AUDIT_FAILURES_SCHEMA}
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
    data = pa.Table.from_pydict(columns, schema=AUDIT_FAILURES_SCHEMA)
    return append_failures(lake, data, audit_id=audit_id), stored

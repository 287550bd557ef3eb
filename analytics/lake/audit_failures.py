"""The audit-failures table: where `entitlements audit --store-failures` keeps every row of each failing
check, and how those rows are read back. Which findings become rows, and what each row says, is the
audits' (analytics/audits/_failures.py); the table, its making, its appends and its reads are the lake's.

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

__all__ = ["AUDIT_FAILURES_SCHEMA", "append_failures", "read_failures"]

import pyarrow as pa
import pyarrow.compute as pc

from analytics.lake._delta import append, ensure_table, open_table
from analytics.lake._files import AUDIT_FAILURES_TABLE
from analytics.lake._filesystem import Lake
from analytics.lake._mask import read_mask
from analytics.lake._schema import AUDIT_FAILURES, AUDIT_FAILURES_SCHEMA, with_comments
from schema.table import USER_PK_PREFIX


def append_failures(lake: Lake, data: pa.Table, *, audit_id: str) -> int:
    """Append one audit run's failing rows (`data`, of `AUDIT_FAILURES_SCHEMA`) to the lake's
    `audits/failures` table in one commit, creating the table on first use; returns the version
    committed. The commit carries the run's `audit_id` in its metadata."""
    # Made as the lake's other tables are: its Delta name, description and column comments from
    # schema/lake.md, for outside readers (the landed rows carry none: delta-rs compares field metadata).
    meaning = AUDIT_FAILURES_TABLE.meaning
    table = ensure_table(
        lake,
        AUDIT_FAILURES,
        with_comments(AUDIT_FAILURES_SCHEMA, meaning.name),
        table_name=meaning.name,
        description=meaning.description,
    )
    return append(lake, table, AUDIT_FAILURES, data, custom_metadata={"audit_id": audit_id})


def read_failures(lake: Lake, *, audit_id: str | None = None) -> pa.Table:
    """The stored failures (of one run, or all), without the rows of any user the erasure mask holds.
    An empty table when none were ever stored."""
    table = open_table(lake, AUDIT_FAILURES)
    if table is None:
        return AUDIT_FAILURES_SCHEMA.empty_table()
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
    return rows.select(AUDIT_FAILURES_SCHEMA.names).cast(AUDIT_FAILURES_SCHEMA)

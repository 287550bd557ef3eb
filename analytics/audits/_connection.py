"""The DuckDB connection the checks run on: the lake's views (analytics/lake/views.py), restricted to an
instant for --as-of, with the audits' inputs set as DuckDB variables (analytics/sql/audits/_parameters.sql
names them) and the erasure exception as a table."""

from __future__ import annotations

__all__ = ["EXCEPTIONS_TABLE", "SCOPE_VARIABLE", "open_connection"]

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import duckdb

from analytics.audits._checks import Scope
from analytics.audits._config import AuditConfig
from analytics.lake import Lake
from analytics.lake.snapshots import snapshot_info
from analytics.lake.views import create_views
from schema.outcomes import FINAL_CLEANUP_OUTCOMES, OutcomeKind
from schema.table import EntitlementStatus, ItemKind

EXCEPTIONS_TABLE = "audit_erasure_exceptions"
# Which check of a file of both scopes runs: the runner sets it to each check's scope before running it.
SCOPE_VARIABLE = "audit_scope"
DELETED_OUTCOMES = frozenset({OutcomeKind.CLEANUP_DELETED, OutcomeKind.CLEANUP_ALREADY_DELETED})


def _literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _list(values: Iterable[str]) -> str:
    return "[" + ", ".join(_literal(v) for v in sorted(values)) + "]"


def _timestamp(moment: datetime | None) -> str:
    if moment is None:
        return "NULL::TIMESTAMPTZ"
    return f"{_literal(moment.isoformat())}::TIMESTAMPTZ"


_RESTRICTED = ("raw_changes", "raw_outcomes")


def _restrict(con: Any, as_of: datetime) -> None:
    """Every view sees the log up to `as_of` (stream time). Outcomes are kept when the change they
    answer is in that log (an outcome's time is the processor's clock, another axis), or, for outcomes
    answering no change, when they occurred by then."""
    instant = _timestamp(as_of)
    con.execute("ALTER VIEW raw_changes RENAME TO audit_raw_changes_all")
    con.execute(
        "CREATE VIEW raw_changes AS SELECT * FROM audit_raw_changes_all "  # noqa: S608
        f"WHERE created_at <= {instant}"
    )
    con.execute("ALTER VIEW raw_outcomes RENAME TO audit_raw_outcomes_all")
    con.execute(
        "CREATE VIEW raw_outcomes AS SELECT * FROM audit_raw_outcomes_all AS o "  # noqa: S608
        f"WHERE (o.source_event_id IS NULL AND o.occurred_at <= {instant}) "
        "OR o.source_event_id IN (SELECT event_id FROM raw_changes)"
    )


def _set_parameters(con: Any, config: AuditConfig, as_of: datetime | None) -> None:
    parameters = config.parameters
    values = {
        "audit_as_of": _timestamp(as_of),
        "audit_cleanup_ttl_days": str(int(config.policy.cleanup_ttl_days)),
        "audit_stale_ttl_days": str(int(config.policy.stale_entitlement_ttl_days)),
        "audit_ttl_tolerance_seconds": str(int(parameters.ttl_tolerance_seconds)),
        "audit_overlap_tolerance_seconds": f"{float(parameters.overlap_tolerance_seconds)!r}::DOUBLE",
        "audit_outcome_grace_seconds": str(int(parameters.outcome_grace_seconds)),
        "audit_known_statuses": _list(s.value for s in EntitlementStatus),
        "audit_known_item_kinds": _list(k.value for k in ItemKind if k is not ItemKind.UNKNOWN),
        "audit_final_outcomes": _list(k.value for k in FINAL_CLEANUP_OUTCOMES),
        "audit_deleted_outcomes": _list(k.value for k in DELETED_OUTCOMES),
        SCOPE_VARIABLE: _literal(Scope.NOW.value),
    }
    for name, value in values.items():
        con.execute(f"SET VARIABLE {name} = {value}")
    con.execute(f"CREATE TABLE IF NOT EXISTS {EXCEPTIONS_TABLE} (user_id VARCHAR NOT NULL)")


def open_connection(
    lake: Lake,
    config: AuditConfig,
    *,
    as_of: datetime | None = None,
    from_snapshot: bool = True,
    threads: int | None = None,
    views: Iterable[str] | None = None,
    mask: Iterable[str] = (),
) -> tuple[duckdb.DuckDBPyConnection, str]:
    """A new connection ready for the checks, and where `now` reads from: "snapshot" (the latest
    snapshot plus the changes it has not folded) or "log" (the whole log folded; always with `as_of`).

    `views`: the lake's views the checks will read (every one by default); fewer bind faster. `mask`: the
    users every view hides."""
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        use_snapshot = from_snapshot and as_of is None and snapshot_info(lake) is not None
        if views is not None and as_of is not None:
            views = {*views, *_RESTRICTED}  # `_restrict` redefines these
        create_views(con, lake, mask=mask, from_snapshot=use_snapshot, views=views)
        if as_of is not None:
            _restrict(con, as_of)
        _set_parameters(con, config, as_of)
    except BaseException:
        con.close()
        raise
    return con, "snapshot" if use_snapshot else "log"

"""Running the checks: each SQL file's offending rows are materialised once, counted, dated and compared
with the check's thresholds; with `store_failures`, every row of each failing check is kept in the lake
(analytics/audits/_failures.py).

An audit needs data: a lake with none raises `analytics.lake.LakeMissing`, an `as_of` before the lake's
first change `analytics.lake.NoDataAsOf` (a PASS over nothing would read as a clean table). On a
bootstrapped lake each history (`ever`) check's result says it cannot see before the lake's history
start T (`note`), and the report carries T."""

from __future__ import annotations

__all__ = ["AuditError", "ErasedUsers", "history_note", "run_audits"]

import base64
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Protocol

import duckdb
import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from analytics.audits._checks import Check, Scope, load_checks
from analytics.audits._config import AuditConfig, Thresholds, load_config
from analytics.audits._connection import EXCEPTIONS_TABLE, SCOPE_VARIABLE, open_connection
from analytics.audits._failures import FailingRows, store_failures
from analytics.audits._models import AuditReport, CheckResult, Status, StoredFailures
from analytics.lake import Lake, LakeMissing, require_as_of, require_data
from analytics.lake.history_start import history_start
from analytics.lake.purge import AUDIT_FAILURES
from analytics.lake.views import views_read_by
from schema.errors import TerminalError

logger = logging.getLogger(__name__)
_RESULT_TABLE = "audit_result"


class AuditError(TerminalError):
    """The audit could not run: the lake or a check could not be read."""


class ErasedUsers(Protocol):
    """The erasure exception's source (docs/operations/erasure.md: a ledger keyed by a keyed hash of the
    user id, holding no personal data). The audit asks it only about users whose deletes would otherwise
    be reported."""

    def is_erased(self, user_id: str, at: datetime | None = None) -> bool:
        """Whether the user's data at `at` is an erasure's (a delete after the erasure completed is the
        new data's: an erased user who signed up again is audited like anyone)."""
        ...


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _status(count: int, thresholds: Thresholds) -> Status:
    if thresholds.error is not None and count >= thresholds.error:
        return Status.ERROR
    if thresholds.warn is not None and count >= thresholds.warn:
        return Status.WARN
    return Status.PASS


def _scalar(con: Any, sql: str) -> Any:
    rows = con.execute(sql).fetchall()
    return rows[0][0] if rows else None


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return [{k: _json_value(v) for k, v in row.items()} for row in table.to_pylist()]


def _run_check(
    con: Any, check: Check, config: AuditConfig, failing: list[FailingRows] | None = None
) -> CheckResult:
    """Run one check; with `failing`, a check that did not pass appends all its rows to it."""
    started = time.perf_counter()
    # A file of both scopes selects its check's rows by this variable (analytics/audits/_checks.py).
    con.execute(f"SET VARIABLE {SCOPE_VARIABLE} = ?", [check.scope.value])
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_RESULT_TABLE} AS {check.sql}")
    rows_involved = int(_scalar(con, f"SELECT count(*) FROM {_RESULT_TABLE}"))  # noqa: S608
    groups: int | None = None
    surplus: int | None = None
    if check.group_by:
        key = ", ".join(check.group_by)
        groups = int(_scalar(con, f"SELECT count(*) FROM (SELECT DISTINCT {key} FROM {_RESULT_TABLE})"))  # noqa: S608
        surplus = rows_involved - groups
    count = groups if groups is not None else rows_involved
    limit = config.parameters.max_rows
    shown: pa.Table = con.sql(f"SELECT * FROM {_RESULT_TABLE} LIMIT {int(limit)}").to_arrow_table()  # noqa: S608
    timeline: dict[str, int] = {}
    if check.time_column and rows_involved:
        dated = con.sql(
            f"SELECT CAST({check.time_column} AS DATE)::VARCHAR AS day, count(*) AS n "  # noqa: S608
            f"FROM {_RESULT_TABLE} WHERE {check.time_column} IS NOT NULL GROUP BY ALL ORDER BY day"
        ).fetchall()
        timeline = {str(day): int(n) for day, n in dated}
    thresholds = config.thresholds(check.name)
    status = _status(count, thresholds)
    if failing is not None and status is not Status.PASS:
        every = con.sql(f"SELECT * FROM {_RESULT_TABLE}").to_arrow_table()  # noqa: S608
        failing.append(FailingRows(check.name, check.scope.value, status.value, _rows(every)))
    con.execute(f"DROP TABLE {_RESULT_TABLE}")
    return CheckResult(
        name=check.name,
        scope=check.scope,
        title=check.title,
        invariant=check.invariant,
        remediation=check.remediation,
        docs=list(check.docs),
        description=check.description,
        sql_file=check.sql_file,
        status=status,
        count=count,
        rows_involved=rows_involved,
        groups=groups,
        surplus_rows=surplus,
        group_by=list(check.group_by),
        warn_at=thresholds.warn,
        error_at=thresholds.error,
        columns=list(shown.column_names),
        rows=_rows(shown),
        rows_truncated=rows_involved > shown.num_rows,
        time_column=check.time_column,
        clock=check.clock,
        timeline=timeline,
        seconds=round(time.perf_counter() - started, 4),
    )


def _exceptions(con: Any, erased_user_ids: Iterable[str], ledger: ErasedUsers | None) -> int:
    """Fill the erasure exception: the ids given, and the users the ledger says were erased among those
    with a delete that would otherwise be reported."""
    erased = {u for u in erased_user_ids if u}
    if ledger is not None:
        # Excepted only when every such delete falls inside the erasure's window (by its latest one).
        candidates = con.sql(
            "SELECT user_id, max(created_at) FROM changes WHERE change_kind = 'REMOVE' AND NOT ttl_deletion "
            "AND item_kind <> 'cancellation' AND user_id IS NOT NULL GROUP BY user_id"
        ).fetchall()
        erased.update(
            str(user_id) for (user_id, latest) in candidates if ledger.is_erased(str(user_id), at=latest)
        )
    con.execute(f"DELETE FROM {EXCEPTIONS_TABLE}")  # noqa: S608
    if erased:
        con.executemany(f"INSERT INTO {EXCEPTIONS_TABLE} VALUES (?)", [(u,) for u in sorted(erased)])  # noqa: S608
    return len(erased)


def run_audits(
    lake: Lake,
    config: AuditConfig | None = None,
    *,
    as_of: datetime | None = None,
    checks: Iterable[str] | None = None,
    erased_user_ids: Iterable[str] = (),
    ledger: ErasedUsers | None = None,
    from_snapshot: bool = True,
    threads: int | None = None,
    clock: Callable[[], datetime] = _utcnow,
    mask: Iterable[str] = (),
    store_failures_in_lake: bool = False,
) -> AuditReport:
    """Run the checks (all, or those named) over `lake` and return the report.

    `now` checks read the table's state: the latest snapshot plus the changes it has not folded
    (`from_snapshot`), else the whole log folded; with `as_of` (stream time), the state made of every
    change up to then, and `ever` checks read the history up to then. `erased_user_ids` and `ledger`
    make the erasure exception (empty by default): deletes of those users are not reported. The users in
    `mask` (being erased) are hidden from every view, as in `analytics.connect`.

    With `store_failures_in_lake`, every row of each check that did not pass is appended to the lake's
    `audits/failures` table in one commit (the report's `stored_failures` says where). Raises
    `LakeMissing` when the lake holds no data, `NoDataAsOf` when `as_of` is before its first change.
    """
    config = config or load_config()
    available = load_checks()
    if checks is None:
        selected = list(available)
    else:
        wanted = list(dict.fromkeys(checks))
        by_name = {c.name: c for c in available}
        unknown = [name for name in wanted if name not in by_name]
        if unknown:
            raise AuditError(
                f"unknown checks: {', '.join(unknown)} (the checks are analytics/sql/audits/*.sql; "
                "see docs/operations/audits.md)"
            )
        selected = [by_name[name] for name in wanted]
    moment = as_of.astimezone(UTC) if as_of is not None else None
    starts = history_start(_require_changes(lake) if moment is None else require_as_of(lake, moment))
    # Only the views this run reads are created: binding a view reads every file footer under it.
    views = set().union(*(views_read_by(check.reads_text) for check in selected))
    if ledger is not None:
        views.add("changes")  # `_exceptions`
    if checks is None:
        views.update(("raw_changes", "raw_outcomes"))  # the report's log summary
    try:
        con, source = open_connection(
            lake,
            config,
            as_of=moment,
            from_snapshot=from_snapshot,
            threads=threads,
            views=views,
            mask=mask,
        )
    except (duckdb.Error, OSError, pa.ArrowException) as error:
        raise AuditError(f"cannot open the lake at {lake.uri} ({type(error).__name__})") from None
    try:
        exceptions = _exceptions(con, erased_user_ids, ledger)
        results: list[CheckResult] = []
        failing: list[FailingRows] | None = [] if store_failures_in_lake else None
        for check in selected:
            try:
                results.append(_noted(_run_check(con, check, config, failing), check, starts))
            except (duckdb.Error, OSError, pa.ArrowException) as error:
                raise AuditError(
                    f"check {check.name} failed on the lake at {lake.uri} ({type(error).__name__})"
                ) from None
            logger.debug("audit check done", extra={"check": check.name, "rows": results[-1].rows_involved})
        changes = outcomes = 0
        log_end: datetime | None = None
        if checks is None:
            summary = con.sql(
                "SELECT count(*) AS n, max(created_at) AS last FROM raw_changes"
            ).to_arrow_table()
            changes, log_end = summary["n"][0].as_py(), summary["last"][0].as_py()
            outcomes = int(_scalar(con, "SELECT count(*) FROM raw_outcomes"))
    except (duckdb.Error, OSError, pa.ArrowException) as error:
        raise AuditError(f"cannot read the lake at {lake.uri} ({type(error).__name__})") from None
    finally:
        con.close()
    generated_at = clock()
    stored = None
    if failing is not None:
        stored = _store(lake, failing, generated_at, moment)
    return AuditReport(
        generated_at=generated_at,
        lake=lake.uri,
        source="snapshot" if source == "snapshot" else "log",
        as_of=moment,
        log_end=log_end,
        log_rows=int(changes or 0),
        outcome_rows=outcomes,
        policy={
            "cleanup_ttl_days": config.policy.cleanup_ttl_days,
            "stale_entitlement_ttl_days": config.policy.stale_entitlement_ttl_days,
        },
        parameters=config.parameters,
        erasure_exceptions=exceptions,
        history_starts_at=starts,
        stored_failures=stored,
        results=results,
    )


def history_note(starts: datetime) -> str:
    """What a history check says on a lake bootstrapped at `starts` (docs/operations/bootstrap.md)."""
    at = starts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return (
        f"The lake was bootstrapped at {at}: its history starts there. This check cannot see before it "
        "(a fault made and undone, an item created and deleted, any change before then is not in the "
        "lake, but for the last stream records before it): a pass means none found since then."
    )


def _noted(result: CheckResult, check: Check, starts: datetime | None) -> CheckResult:
    if starts is None or check.scope is not Scope.EVER:
        return result
    return result.model_copy(update={"note": history_note(starts)})


def _require_changes(lake: Lake) -> DeltaTable:
    """Every check reads the table's history or its state folded from it: over a lake whose change log
    holds no row (outcomes alone) each finds nothing, and a PASS over nothing reads as a clean table.
    Returns the changes table."""
    changes = require_data(lake)
    actions = pa.table(changes.get_add_actions(flatten=True))
    rows = sum(n or 0 for n in actions["num_records"].to_pylist()) if actions.num_rows else 0
    if not rows:
        raise LakeMissing(
            lake.uri, reason="with no change rows (outcomes alone: an audit over nothing never passes)"
        )
    return changes


def _store(
    lake: Lake, failing: list[FailingRows], generated_at: datetime, as_of: datetime | None
) -> StoredFailures:
    audit_id = uuid.uuid4().hex
    try:
        version, rows = store_failures(lake, failing, audit_id=audit_id, audited_at=generated_at, as_of=as_of)
    except (OSError, pa.ArrowException, DeltaError) as error:
        raise AuditError(
            f"cannot store the failing rows in {lake.uri_for(AUDIT_FAILURES)} ({type(error).__name__})"
        ) from None
    logger.info("audit failures stored", extra={"checks": len(failing), "rows": rows})
    return StoredFailures(
        dataset=AUDIT_FAILURES, audit_id=audit_id, version=version, checks=len(failing), rows=rows
    )

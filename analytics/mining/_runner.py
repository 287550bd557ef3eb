"""Running a mining report over the lake's views: its SQL's table, and the charts its header asks for."""

from __future__ import annotations

__all__ = ["MiningError", "MiningResult", "report_charts", "run_report"]

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa

from analytics.lake import Lake
from analytics.lake.views import create_views, views_read_by
from analytics.mining._reports import MINING_SQL_DIR, Report, load_reports
from analytics.reports import Chart, bar_chart, grouped_bar_chart, line_chart
from config import PolicySettings
from schema.errors import TerminalError


class MiningError(TerminalError):
    """A report could not run: an unknown name, or a lake that cannot be read."""


@dataclass(frozen=True)
class MiningResult:
    report: Report
    table: pa.Table
    generated_at: datetime
    lake: str

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def rows(self) -> list[dict[str, Any]]:
        """The rows as JSON-ready values (dates and times in ISO 8601)."""
        return [{k: _json_value(v) for k, v in row.items()} for row in self.table.to_pylist()]


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def run_report(
    lake: Lake,
    name: str,
    *,
    policy: PolicySettings | None = None,
    from_snapshot: bool = False,
    generated_at: datetime | None = None,
    mask: Iterable[str] = (),
    as_of: datetime | None = None,
) -> MiningResult:
    """Run the report called `name` over `lake` (views from analytics/sql, then
    analytics/sql/mining/_base.sql, then the report's SQL), hiding the users in `mask`; with `as_of`
    (stream creation time), over the lake as it stood then (read only: nothing is written to the lake).
    Raises `LakeMissing` on a lake with no data, `NoDataAsOf` before its first change."""
    reports = {r.name: r for r in load_reports()}
    report = reports.get(name)
    if report is None:
        raise MiningError(f"unknown report {name!r}; `entitlements mine --list` lists them")
    policy = policy or PolicySettings()
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        base = (MINING_SQL_DIR / "_base.sql").read_text(encoding="utf-8")
        views = views_read_by(base) | views_read_by(report.sql)
        create_views(con, lake, mask=mask, from_snapshot=from_snapshot, views=views, as_of=as_of)
        con.execute(f"SET VARIABLE mine_cleanup_ttl_days = {int(policy.cleanup_ttl_days)}")
        con.execute(f"SET VARIABLE mine_stale_ttl_days = {int(policy.stale_entitlement_ttl_days)}")
        con.execute(base)
        table = con.sql(report.sql).to_arrow_table()
    except (duckdb.Error, OSError, pa.ArrowException) as error:
        raise MiningError(f"report {name} failed ({type(error).__name__})") from error
    finally:
        con.close()
    return MiningResult(
        report=report,
        table=table,
        generated_at=generated_at or datetime.now(UTC),
        lake=lake.uri,
    )


def _numbers(values: list[Any]) -> list[float | None]:
    return [None if v is None else float(v) for v in values]


def report_charts(result: MiningResult) -> list[Chart]:
    """The chart the report's header asks for, when it has rows."""
    spec = result.report.chart
    if spec is None or result.table.num_rows == 0:
        return []
    x = result.table[spec.x].to_pylist()
    series = {column: _numbers(result.table[column].to_pylist()) for column in spec.y}
    # One clock per chart, named in its title (analytics/mining/_reports.py, `clock:`).
    title = f"{result.report.title} ({spec.clock_label})" if spec.clock_label else result.report.title
    if spec.kind in ("bar", "logbar"):
        labels = [str(v) for v in x]
        if len(series) == 1 and spec.kind == "bar":
            ((column, values),) = series.items()
            return [bar_chart(title, labels, [v or 0.0 for v in values], xlabel=column)]
        return [grouped_bar_chart(title, labels, series, log_scale=spec.kind == "logbar")]
    xlabel = f"{spec.x} ({spec.clock_label})" if spec.clock_label else spec.x
    return [line_chart(title, x, series, xlabel=xlabel, stacked_bars=spec.kind == "stacked")]

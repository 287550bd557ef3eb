"""Mining: the reports an analyst of the entitlements service asks for, over the lake's views.

Each report is a SQL file in analytics/sql/mining/ (a SELECT, its title and chart in a comment header,
sharing the helper views of `_base.sql`); `run_report` runs one and `render_mining` renders it as a
terminal table, Markdown, JSON, CSV or HTML with its chart. `entitlements mine REPORT` is the command.

The names are loaded on first use: `MiningFormat` and the report definitions come without DuckDB,
pyarrow or matplotlib (`entitlements mine --help` and `--list` load none of them).
"""

from __future__ import annotations

__all__ = [
    "MINING_SQL_DIR",
    "ChartSpec",
    "MiningError",
    "MiningFormat",
    "MiningResult",
    "Report",
    "ReportDefinitionError",
    "load_reports",
    "render_mining",
    "report_charts",
    "run_report",
]

from typing import TYPE_CHECKING

from schema.faces import lazy_names

if TYPE_CHECKING:
    from analytics.mining._formats import MiningFormat
    from analytics.mining._render import render_mining
    from analytics.mining._reports import (
        MINING_SQL_DIR,
        ChartSpec,
        Report,
        ReportDefinitionError,
        load_reports,
    )
    from analytics.mining._runner import MiningError, MiningResult, report_charts, run_report

_HOME = {
    "MINING_SQL_DIR": "analytics.mining._reports",
    "ChartSpec": "analytics.mining._reports",
    "MiningError": "analytics.mining._runner",
    "MiningFormat": "analytics.mining._formats",
    "MiningResult": "analytics.mining._runner",
    "Report": "analytics.mining._reports",
    "ReportDefinitionError": "analytics.mining._reports",
    "load_reports": "analytics.mining._reports",
    "render_mining": "analytics.mining._render",
    "report_charts": "analytics.mining._runner",
    "run_report": "analytics.mining._runner",
}


__getattr__ = lazy_names(__name__, _HOME)

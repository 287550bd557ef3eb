"""Mining: the reports an analyst of the entitlements service asks for, over the lake's views.

Each report is a SQL file in analytics/sql/mining/ (a SELECT, its title and chart in a comment header,
sharing the helper views of `_base.sql`); `run_report` runs one and `render_mining` renders it as a
terminal table, Markdown, JSON, CSV or HTML with its chart. `entitlements mine REPORT` is the command.
"""

from analytics.mining._render import MiningFormat, render_mining
from analytics.mining._reports import MINING_SQL_DIR, ChartSpec, Report, ReportDefinitionError, load_reports
from analytics.mining._runner import MiningError, MiningResult, report_charts, run_report

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

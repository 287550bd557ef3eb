"""A mining report as a terminal table, Markdown, JSON, CSV or HTML (jinja2 templates in
analytics/reports/templates/, charts embedded as base64 PNG in HTML)."""

from __future__ import annotations

__all__ = ["MiningFormat", "render_mining"]

import csv
import io
import json
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from analytics.mining._formats import MiningFormat
from analytics.mining._runner import MiningResult, report_charts
from analytics.reports import counted, render


def _text(value: object) -> str:
    return "" if value is None else str(value)


def render_mining(
    result: MiningResult, fmt: MiningFormat | str = MiningFormat.TABLE, *, chart_files: Sequence[str] = ()
) -> str:
    """The report in `fmt`. Markdown links `chart_files` (PNG files written beside it) when given."""
    chosen = MiningFormat(fmt)
    rows = result.rows()
    if chosen is MiningFormat.JSON:
        document = {
            "report": result.report.name,
            "title": result.report.title,
            "description": result.report.description,
            "sql_file": result.report.sql_file,
            "generated_at": result.generated_at.isoformat(),
            "lake": result.lake,
            "columns": result.columns,
            "rows": rows,
        }
        return json.dumps(document, indent=1) + "\n"
    if chosen is MiningFormat.CSV:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows([_text(row[c]) for c in result.columns] for row in rows)
        return buffer.getvalue()
    if chosen is MiningFormat.TABLE:
        table = Table(*result.columns, title=result.report.title)
        for row in rows:
            table.add_row(*(_text(row[c]) for c in result.columns))
        console = Console(file=io.StringIO(), width=200, color_system=None)
        console.print(table)
        console.print(f"{counted(len(rows), 'row')}. {result.report.description}")
        out = console.file
        assert isinstance(out, io.StringIO)
        return out.getvalue()
    template = "mining.html.j2" if chosen is MiningFormat.HTML else "mining.md.j2"
    charts = report_charts(result) if chosen is MiningFormat.HTML else []
    return render(template, result=result, rows=rows, charts=charts, chart_files=list(chart_files))

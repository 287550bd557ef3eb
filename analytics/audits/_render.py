"""The audit report as Markdown, JSON, HTML (jinja2 templates in analytics/reports/templates/, charts
drawn with matplotlib and embedded as base64 PNG) or JUnit XML (analytics/audits/_junit.py)."""

from __future__ import annotations

__all__ = ["ReportFormat", "audit_charts", "render_report"]

from analytics.audits._checks import TimeAxis
from analytics.audits._formats import ReportFormat
from analytics.audits._junit import junit_xml
from analytics.audits._models import AuditReport, Status
from analytics.reports import Chart, bar_chart, line_chart, render

_COLORS = {Status.PASS: "#3a9a5b", Status.WARN: "#d08a1f", Status.ERROR: "#c23b3b"}


def audit_charts(report: AuditReport) -> list[Chart]:
    """What is easier seen than read: each check's count by status, and when the findings happened: one
    chart per clock the checks date their findings on (stream time, the processor's clock), each named
    in its title and on its axis."""
    results = report.results
    # Only the checks that found something: a bar of 0 per passing check buries the few that matter (the
    # checks table lists them all).
    found = [r for r in results if r.count]
    charts = []
    if found:
        charts.append(
            bar_chart(
                f"Findings per check: {len(found)} of {len(results)} checks found something "
                "(groups for duplicates, else rows)",
                [f"{r.name} ({r.scope.value})" for r in found],
                [r.count for r in found],
                colors=[_COLORS[r.status] for r in found],
                xlabel="findings",
                alt="; ".join(f"{r.name}: {r.count} ({r.status.value})" for r in found),
            )
        )
    for clock in TimeAxis:  # one chart per clock: days of two calendars never share an axis
        dated = [r for r in results if r.timeline and r.clock is clock]
        if not dated:
            continue
        days = sorted({day for r in dated for day in r.timeline})
        charts.append(
            line_chart(
                f"Findings by day, {clock.label}",
                days,
                {r.name: [r.timeline.get(day, 0) for day in days] for r in dated},
                ylabel="rows",
                xlabel=f"day ({clock.label})",
                stacked_bars=True,
                alt=f"findings on {len(days)} days of {clock.label}: "
                + "; ".join(f"{r.name}: {sum(r.timeline.values())}" for r in dated),
            )
        )
    return charts


def render_report(report: AuditReport, fmt: ReportFormat | str = ReportFormat.MARKDOWN) -> str:
    chosen = ReportFormat(fmt)
    if chosen is ReportFormat.JSON:
        return report.to_json()
    if chosen is ReportFormat.JUNIT:
        return junit_xml(report)
    if chosen is ReportFormat.HTML:
        return render("audit.html.j2", report=report, Status=Status, charts=audit_charts(report))
    return render("audit.md.j2", report=report, Status=Status)

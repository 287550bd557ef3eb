"""Audits: every invariant of the table contract (docs/table.md), checked now (the table's state) and ever
(its history).

Each check is a SQL file in analytics/sql/audits/ (a SELECT returning the offending rows, its metadata
in a comment header; a rule checked both now and ever is one file holding its two checks, the scope a
DuckDB variable the runner binds); `run_audits` runs them over the lake's views, counts what each finds
(groups, surplus rows and rows involved for duplicates), compares the count with the check's warn and error
thresholds (analytics/audits/defaults.toml) and returns an `AuditReport`, which renders as Markdown, JSON
HTML or JUnit XML (`render_report`). Each check carries its remediation and the docs pages to read
(docs/operations/audits.md has a section per check). With `store_failures_in_lake`, every row of each
failing check is kept in the lake (`read_failures` reads them back, hiding masked users).
`entitlements audit` is the command.

The names are loaded on first use: `ReportFormat` and the checks' definitions come without DuckDB,
pyarrow or matplotlib (`entitlements audit --help` loads none of them).
"""

from __future__ import annotations

__all__ = [
    "AuditConfig",
    "AuditParameters",
    "AuditReport",
    "ReportFormat",
    "Status",
    "load_checks",
    "load_config",
    "read_failures",
    "render_report",
    "run_audits",
]

from typing import TYPE_CHECKING

from schema.faces import lazy_names

if TYPE_CHECKING:
    from analytics.audits._checks import load_checks
    from analytics.audits._config import AuditConfig, AuditParameters, load_config
    from analytics.audits._formats import ReportFormat
    from analytics.audits._models import AuditReport, Status
    from analytics.audits._render import render_report
    from analytics.audits._runner import run_audits
    from analytics.lake.audit_failures import read_failures

_HOME = {
    "AuditConfig": "analytics.audits._config",
    "AuditParameters": "analytics.audits._config",
    "AuditReport": "analytics.audits._models",
    "ReportFormat": "analytics.audits._formats",
    "Status": "analytics.audits._models",
    "load_checks": "analytics.audits._checks",
    "load_config": "analytics.audits._config",
    "read_failures": "analytics.lake.audit_failures",
    "render_report": "analytics.audits._render",
    "run_audits": "analytics.audits._runner",
}


__getattr__ = lazy_names(__name__, _HOME)

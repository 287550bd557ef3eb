"""Audits: every invariant of the table contract (docs/table.md), checked now (the table's state) and ever
(its history).

Each check is a SQL file in analytics/sql/audits/ (a SELECT returning the offending rows, its metadata
in a comment header); `run_audits` runs them over the lake's views, counts what each finds (groups,
surplus rows and rows involved for duplicates), compares the count with the check's warn and error
thresholds (analytics/audits/defaults.toml) and returns an `AuditReport`, which renders as Markdown, JSON
HTML or JUnit XML (`render_report`). Each check carries its remediation and the docs pages to read
(docs/operations/audits.md has a section per check). With `store_failures_in_lake`, every row of each
failing check is kept in the lake (`read_failures` reads them back, hiding masked users).
`entitlements audit` is the command.
"""

from analytics.audits._checks import load_checks
from analytics.audits._config import AuditConfig, AuditParameters, load_config
from analytics.audits._failures import read_failures
from analytics.audits._models import AuditReport, Status
from analytics.audits._render import ReportFormat, render_report
from analytics.audits._runner import run_audits

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

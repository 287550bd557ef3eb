"""The audit report as JUnit XML, for CI systems (junitparser writes it): one test case per check, named by
the check, in a class per scope (`audit.now`, `audit.ever`).

A check at error is a `<failure>` whose message gives its count and threshold and whose text its title,
counts, remediation and docs pages; a warning passes, with the same text in `<system-out>` (JUnit has no
warning, and `entitlements audit` exits 0 on warnings); a pass is an empty test case, but for a note (a
history check on a bootstrapped lake: what it cannot see) in `<system-out>`. Counts and names only: never
a row's value, so the file can go to any CI system.
"""

from __future__ import annotations

__all__ = ["junit_xml"]

from junitparser import Failure, JUnitXml, TestCase, TestSuite

from analytics.audits._models import AuditReport, CheckResult, Status

SUITE = "entitlements audit"


def _counted(result: CheckResult) -> str:
    if result.counts_duplicates:
        return (
            f"{result.groups} duplicate groups (by {', '.join(result.group_by)}), "
            f"{result.surplus_rows} surplus rows, {result.rows_involved} rows involved"
        )
    return f"{result.rows_involved} rows found"


def _message(result: CheckResult) -> str:
    threshold = result.error_at if result.status is Status.ERROR else result.warn_at
    level = result.status.value
    findings = "finding" if result.count == 1 else "findings"
    return f"{level.upper()}: {result.count} {findings} ({level} at {threshold})"


def _details(result: CheckResult) -> str:
    return "\n".join(
        [
            f"{result.title} ({result.name}, {result.scope.value}): {_counted(result)}.",
            f"Invariant: {result.invariant}",
            f"Remediation: {result.remediation}",
            f"Docs: {', '.join(result.docs)}",
            f"SQL: {result.sql_file}",
            *([f"Note: {result.note}"] if result.note else []),
        ]
    )


def _case(result: CheckResult) -> TestCase:
    case = TestCase(result.name, classname=f"audit.{result.scope.value}", time=result.seconds)
    if result.status is Status.ERROR:
        failure = Failure(_message(result), type_="error")
        failure.text = _details(result)
        case.result = [failure]
    elif result.status is Status.WARN:
        case.system_out = f"{_message(result)}\n{_details(result)}"
    elif result.note:
        case.system_out = f"Note: {result.note}"
    return case


def junit_xml(report: AuditReport) -> str:
    """The report as a JUnit XML document (one suite, one case per check)."""
    suite = TestSuite(SUITE)
    suite.timestamp = report.generated_at.isoformat()
    suite.add_property("status", report.status.value)
    for name, value in report.counts.items():
        suite.add_property(f"checks.{name}" if name in {s.value for s in Status} else name, str(value))
    suite.add_property("state_read_from", report.source)
    suite.add_property("as_of", report.as_of.isoformat() if report.as_of else "end of the log")
    if report.history_starts_at is not None:
        suite.add_property("history_starts_at", report.history_starts_at.isoformat())
    for result in report.results:
        suite.add_testcase(_case(result))
    suite.update_statistics()  # type: ignore[no-untyped-call]
    document = JUnitXml(SUITE)
    document.add_testsuite(suite)
    document.update_statistics()  # type: ignore[no-untyped-call]
    text = document.tostring()  # type: ignore[no-untyped-call]
    body = text.decode() if isinstance(text, bytes) else str(text)
    return f'<?xml version="1.0" encoding="utf-8"?>\n{body}\n'

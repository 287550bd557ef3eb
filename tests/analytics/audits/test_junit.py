"""analytics/audits/_junit.py: the report as JUnit XML for CI systems: a test case per check, failures for
the checks at error, names and counts only."""

from __future__ import annotations

import pytest
from junitparser import Failure, JUnitXml

from analytics.audits import AuditReport, render_report, run_audits
from analytics.audits._config import Thresholds, load_config
from analytics.lake import open_lake
from tests.analytics.audits.story import TOKEN_CANARY, clean_story


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    """A duplicate (an error) and a string ttl (made a warning). Landed and audited once for the module:
    the report is frozen and every test here only reads it."""
    story = clean_story()
    story.signup("mallory", "acct-m1")
    story.signup("mallory", "acct-m2")
    story.cancel("frank", ttl="1893456000")
    config = load_config()
    checks = {**config.checks, "cleanup_ttl_not_actionable": Thresholds(warn=1)}
    lake = open_lake(str(tmp_path_factory.mktemp("planted") / "lake"))
    story.land(lake)
    return run_audits(lake, config=config.model_copy(update={"checks": checks}))


def parsed(report: AuditReport) -> JUnitXml:
    return JUnitXml.fromstring(render_report(report, "junit"))


def test_each_check_is_one_test_case_named_by_the_check_in_its_scope_class(planted: AuditReport) -> None:
    (suite,) = list(parsed(planted))
    cases = {case.name: case.classname for case in suite}
    assert cases == {r.name: f"audit.{r.scope.value}" for r in planted.results}


def test_the_suite_counts_the_checks_and_the_checks_at_error_as_failures(planted: AuditReport) -> None:
    (suite,) = list(parsed(planted))
    at_error = [r.name for r in planted.results if r.status.value == "error"]
    assert (suite.tests, suite.failures, suite.errors) == (len(planted.results), len(at_error), 0)
    assert sorted(case.name for case in suite if not case.is_passed) == sorted(at_error)


def test_a_failure_gives_the_count_the_threshold_the_remediation_and_the_docs(planted: AuditReport) -> None:
    (suite,) = list(parsed(planted))
    case = next(c for c in suite if c.name == "duplicate_active_rows")
    (failure,) = [r for r in case.result if isinstance(r, Failure)]
    assert failure.message == "ERROR: 1 finding (error at 1)"
    result = planted.result("duplicate_active_rows")
    assert result.remediation in (failure.text or "")
    assert "docs/operations/audits.md#duplicate_active_rows" in (failure.text or "")


def test_a_warning_passes_with_its_text_in_system_out(planted: AuditReport) -> None:
    (suite,) = list(parsed(planted))
    case = next(c for c in suite if c.name == "cleanup_ttl_not_actionable")
    assert case.is_passed
    assert (case.system_out or "").startswith("WARN: 1 finding (warn at 1)")


def test_no_row_value_reaches_the_xml(planted: AuditReport) -> None:
    xml = render_report(planted, "junit")
    identifying = ("user_id", "array_account_id", "pk", "sk", "event_id", "ttl_raw", "row_user_id")
    values = {str(row[c]) for r in planted.results for row in r.rows for c in identifying if row.get(c)}
    assert values and {v for v in values if v in xml} == set()
    assert TOKEN_CANARY not in xml


def test_the_suite_properties_give_the_status_and_the_counts(planted: AuditReport) -> None:
    (suite,) = list(parsed(planted))
    properties = {p.name: p.value for p in suite.properties()}
    assert properties["status"] == "error"
    assert properties["checks"] == str(len(planted.results))
    assert properties["checks.error"] == str(planted.counts["error"])
    assert properties["checks.warn"] == "1"

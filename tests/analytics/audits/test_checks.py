"""analytics/audits/_checks.py and analytics/sql/audits/: the checks' files and their headers."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from analytics.audits import load_checks, load_config
from analytics.audits._checks import (
    AUDIT_SQL_DIR,
    CHECK_DOCS,
    CHECK_ORDER,
    SCOPE_SELECTOR,
    CheckDefinitionError,
    Scope,
    TimeAxis,
)
from analytics.audits._connection import open_connection
from analytics.lake import Lake
from analytics.lake.views import create_views, views_read_by
from tests.analytics.audits.story import Story

REPOSITORY = Path(__file__).resolve().parents[3]
# A reference only the project's authors can follow: the design seeds and the issue tracker.
UNFOLLOWABLE = re.compile(r"\bseeds?\s+0*\d+|\bissues?\s+#?\d+", re.IGNORECASE)


def anchors(page: Path) -> set[str]:
    """The anchors a Markdown page's headings get (GitHub's rule: lower case, punctuation dropped,
    spaces to hyphens), and any explicit `<a id>`."""
    found = set(re.findall(r'<a id="([^"]+)"', page.read_text(encoding="utf-8")))
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_every_audit_file_is_a_check_in_report_order() -> None:
    checks = load_checks()
    files = sorted(p.name for p in AUDIT_SQL_DIR.glob("*.sql") if not p.name.startswith("_"))
    assert sorted({c.path.name for c in checks}) == files
    assert [c.name for c in checks] == list(CHECK_ORDER)


def test_each_rule_checked_now_and_ever_is_one_file_of_both_scopes() -> None:
    checks = {c.name: c for c in load_checks()}
    twins = {name.removesuffix("_ever") for name in checks if name.endswith("_ever")}
    assert len(twins) == 8
    for name in twins:
        now, ever = checks[name], checks[f"{name}_ever"]
        assert (now.scope, ever.scope) == (Scope.NOW, Scope.EVER)
        assert now.path == ever.path == AUDIT_SQL_DIR / f"{name}.sql"
        assert now.sql == ever.sql and now.invariant == ever.invariant
    assert not list(AUDIT_SQL_DIR.glob("*_ever.sql"))


def test_a_check_of_a_file_of_both_scopes_needs_only_its_own_scopes_views() -> None:
    checks = {c.name: c for c in load_checks()}
    assert views_read_by(checks["duplicate_active_rows"].reads_text) == {"entitlements"}
    assert views_read_by(checks["duplicate_active_rows_ever"].reads_text) == {"entitlement_history"}
    assert views_read_by(checks["stale_write"].reads_text) == views_read_by(checks["stale_write"].sql)


BOTH = """-- audit: twin
-- scope: now, ever
-- invariant: i
-- docs: docs/table.md#statuses
-- clock: stream
-- now.title: t now
-- now.remediation: r now
-- now.time: changed_at
-- now: what now finds,
-- ever.title: t ever
-- ever.remediation: r ever
-- ever.docs: docs/table.md#keys
-- ever.time: first_seen_at
-- ever: what ever finds,
-- in both.
WITH now_findings AS (SELECT 1 AS a, now() AS changed_at),
ever_findings AS (SELECT 2 AS b, now() AS first_seen_at)
"""


def test_a_file_of_both_scopes_is_two_checks_each_with_its_own_keys_and_the_shared_ones(
    tmp_path: Path,
) -> None:
    (tmp_path / "twin.sql").write_text(BOTH + SCOPE_SELECTOR + "\n")
    now, ever = load_checks(tmp_path)
    assert (now.name, now.scope, ever.name, ever.scope) == ("twin", Scope.NOW, "twin_ever", Scope.EVER)
    assert (now.title, now.remediation, now.time_column) == ("t now", "r now", "changed_at")
    assert (ever.title, ever.remediation, ever.time_column) == ("t ever", "r ever", "first_seen_at")
    assert now.invariant == ever.invariant == "i" and now.clock is ever.clock is TimeAxis.STREAM
    assert now.docs == (f"{CHECK_DOCS}#twin", "docs/table.md#statuses")
    assert ever.docs == (f"{CHECK_DOCS}#twin_ever", "docs/table.md#keys")
    assert (now.description, ever.description) == ("what now finds, in both.", "what ever finds, in both.")


def test_a_file_of_both_scopes_runs_the_cte_of_the_scope_bound(tmp_path: Path) -> None:
    (tmp_path / "twin.sql").write_text(BOTH + SCOPE_SELECTOR + "\n")
    now, _ = load_checks(tmp_path)
    con = duckdb.connect()
    found = {}
    for scope in ("now", "ever"):
        con.execute("SET VARIABLE audit_scope = ?", [scope])
        found[scope] = con.sql(now.sql).columns
    assert found == {"now": ["a", "changed_at"], "ever": ["b", "first_seen_at"]}
    con.execute("SET VARIABLE audit_scope = 'later'")
    with pytest.raises(duckdb.InvalidInputException, match="audit_scope is now or ever"):
        con.sql(now.sql)


def test_a_file_of_both_scopes_runs_as_its_now_check_where_no_scope_is_bound(tmp_path: Path) -> None:
    (tmp_path / "twin.sql").write_text(BOTH + SCOPE_SELECTOR + "\n")
    now, _ = load_checks(tmp_path)
    assert duckdb.connect().sql(now.sql).columns == ["a", "changed_at"]


def test_a_file_of_both_scopes_that_does_not_end_with_the_scope_selector_is_refused(tmp_path: Path) -> None:
    (tmp_path / "twin.sql").write_text(BOTH + "SELECT * FROM now_findings\n")
    with pytest.raises(CheckDefinitionError, match="scope selector"):
        load_checks(tmp_path)


def test_a_file_of_both_scopes_without_one_scopes_cte_is_refused(tmp_path: Path) -> None:
    (tmp_path / "twin.sql").write_text(BOTH.replace("ever_findings", "later_findings") + SCOPE_SELECTOR)
    with pytest.raises(CheckDefinitionError, match="ever_findings once"):
        load_checks(tmp_path)


def test_a_scopes_own_header_line_in_a_file_of_one_scope_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.sql").write_text(HEADER + "-- ever.title: t\nSELECT 1\n")
    with pytest.raises(CheckDefinitionError, match="scope: now, ever"):
        load_checks(tmp_path)


def test_a_file_of_both_scopes_lacking_one_scopes_title_is_refused(tmp_path: Path) -> None:
    (tmp_path / "twin.sql").write_text(BOTH.replace("-- ever.title: t ever\n", "") + SCOPE_SELECTOR)
    with pytest.raises(CheckDefinitionError, match=re.escape("lacks title (ever)")):
        load_checks(tmp_path)


def test_every_check_says_its_scope_title_invariant_and_remediation() -> None:
    for check in load_checks():
        assert check.scope in (Scope.NOW, Scope.EVER)
        assert check.title and check.invariant and check.description and check.remediation, check.name


def test_every_check_points_first_to_its_own_section_of_the_audits_page() -> None:
    assert all(check.docs[0] == f"{CHECK_DOCS}#{check.name}" for check in load_checks())


def test_every_docs_page_a_check_names_exists_with_its_anchor() -> None:
    broken = []
    for check in load_checks():
        for reference in check.docs:
            page, _, anchor = reference.partition("#")
            path = REPOSITORY / page
            if not path.is_file() or not anchor or anchor not in anchors(path):
                broken.append(f"{check.name}: {reference}")
    assert broken == []


def test_no_check_cites_a_seed_or_an_issue() -> None:
    for check in load_checks():
        shown = " ".join((check.title, check.invariant, check.remediation, check.description))
        assert not UNFOLLOWABLE.search(shown), check.name


# The checks that date a finding by an outcome (outcomes.occurred_at: the processor's clock).
PROCESSOR_CLOCK_CHECKS = {
    "array_account_without_row",
    "deleted_account_row_not_removed",
    "deleted_account_row_not_removed_ever",
    "guard_refusals",
}


def test_every_check_dates_its_findings_on_one_declared_clock() -> None:
    checks = load_checks()
    assert all(c.time_column and c.clock for c in checks)
    assert {c.name for c in checks if c.clock is TimeAxis.PROCESSOR} == PROCESSOR_CLOCK_CHECKS
    assert {c.clock for c in checks if c.name not in PROCESSOR_CLOCK_CHECKS} == {TimeAxis.STREAM}


def test_the_processor_clock_checks_date_their_findings_by_an_outcomes_time() -> None:
    for check in load_checks():
        if check.clock is TimeAxis.PROCESSOR:
            assert "FROM outcomes" in check.sql and "occurred_at" in check.sql, check.name


HEADER = "-- audit: odd\n-- scope: now\n-- title: t\n-- invariant: i\n-- remediation: r\n"


def test_a_time_column_without_its_clock_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.sql").write_text(HEADER + "-- time: changed_at\nSELECT 1\n")
    with pytest.raises(CheckDefinitionError, match="declares its clock"):
        load_checks(tmp_path)


def test_a_clock_not_among_the_lakes_clocks_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.sql").write_text(HEADER + "-- time: changed_at\n-- clock: wall\nSELECT 1\n")
    with pytest.raises(CheckDefinitionError, match=re.escape("clock is one of stream|processor|business")):
        load_checks(tmp_path)


def test_a_clock_without_a_time_column_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.sql").write_text(HEADER + "-- clock: stream\nSELECT 1\n")
    with pytest.raises(CheckDefinitionError, match="only with a time column"):
        load_checks(tmp_path)


def test_a_file_whose_header_lacks_the_remediation_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.sql").write_text(
        "-- audit: odd\n-- scope: now\n-- title: t\n-- invariant: i\nSELECT 1\n"
    )
    with pytest.raises(CheckDefinitionError, match="remediation"):
        load_checks(tmp_path)


def test_the_duplicate_checks_count_by_user() -> None:
    grouped = {c.name: c.group_by for c in load_checks() if c.group_by}
    assert grouped == {"duplicate_active_rows": ("user_id",), "duplicate_active_rows_ever": ("user_id",)}


def test_a_file_whose_header_lacks_the_scope_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.sql").write_text("-- audit: odd\n-- title: t\n-- invariant: i\nSELECT 1\n")
    with pytest.raises(CheckDefinitionError, match="scope"):
        load_checks(tmp_path)


def test_a_file_named_differently_from_its_audit_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.sql").write_text(
        "-- audit: even\n-- scope: now\n-- title: t\n-- invariant: i\n-- remediation: r\nSELECT 1\n"
    )
    with pytest.raises(CheckDefinitionError, match="file name"):
        load_checks(tmp_path)


def _variables(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    names = [
        "audit_as_of",
        "audit_cleanup_ttl_days",
        "audit_stale_ttl_days",
        "audit_ttl_tolerance_seconds",
        "audit_overlap_tolerance_seconds",
        "audit_outcome_grace_seconds",
        "audit_known_statuses",
        "audit_known_item_kinds",
        "audit_final_outcomes",
        "audit_deleted_outcomes",
        "audit_scope",
    ]
    return {
        name: str(con.execute(f"SELECT getvariable('{name}')::VARCHAR").fetchall()[0][0]) for name in names
    }


def test_the_cli_parameters_file_sets_what_python_sets_by_default(lake: Lake, story: Story) -> None:
    story.land(lake)
    con, _ = open_connection(lake, load_config())
    cli = duckdb.connect()
    create_views(cli, lake)
    cli.execute((AUDIT_SQL_DIR / "_parameters.sql").read_text())
    assert _variables(cli) == _variables(con)


def test_each_audit_file_runs_as_written_after_the_views_and_the_parameters_file(
    lake: Lake, story: Story
) -> None:
    story.signup("mallory", "acct-m1")
    story.signup("mallory", "acct-m2")
    story.land(lake)
    con = duckdb.connect()
    create_views(con, lake)
    con.execute((AUDIT_SQL_DIR / "_parameters.sql").read_text())
    counts = {}
    for check in load_checks():
        # As one running an ever check of a file of both scopes by hand sets it.
        con.execute("SET VARIABLE audit_scope = ?", [check.scope.value])
        counts[check.name] = con.sql(check.sql).to_arrow_table().num_rows
    assert {name: n for name, n in counts.items() if n} == {
        "duplicate_active_rows": 2,
        "duplicate_active_rows_ever": 2,
    }


def test_the_audits_page_gives_each_check_its_section_with_the_remediation_the_report_prints() -> None:
    page = (REPOSITORY / CHECK_DOCS).read_text(encoding="utf-8")
    sections = {part.split("\n", 1)[0].strip(): part for part in page.split("\n#### ")[1:]}
    for check in load_checks():
        assert check.remediation in sections.get(check.name, ""), check.name

"""analytics/audits/_failures.py: the failing checks' rows kept in the lake, the erasure's reach into
them (purge, holdings), and the view `audit_failures` over them (analytics/sql/70_audit_failures.sql).
The table itself (made on first use, read back without masked users) is the lake's:
tests/analytics/lake/test_audit_failures.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.audits import AuditReport, read_failures, run_audits
from analytics.audits._config import Thresholds, load_config
from analytics.lake import Lake
from analytics.lake.audit_failures import AUDIT_FAILURES_SCHEMA
from analytics.lake.eraser import AnalyticsLakeEraser
from analytics.lake.purge import AUDIT_FAILURES
from analytics.lake.views import connect, run_read_only
from entitlements.cli import app as cli
from schema.table import cancellation_key
from tests.analytics.audits.story import Story, clean_story
from tests.support.lake_templates import LakeTemplates

Audit = Callable[..., AuditReport]


def plant_duplicate(story: Story) -> None:
    story.signup("mallory", "acct-m1")
    story.tick(minutes=5)
    story.signup("mallory", "acct-m2")


def plant_record_naming_anothers_account(story: Story) -> None:
    """frank's cancellation record names the account alice's Active row uses."""
    story.put(story.record(cancellation_key("frank"), "frank", "acct-a1", 1_999_999_999))


@pytest.fixture
def stored(lake: Lake, lake_templates: LakeTemplates) -> AuditReport:
    def build(fresh: Lake) -> AuditReport:
        story = clean_story()
        plant_duplicate(story)
        plant_record_naming_anothers_account(story)
        story.land(fresh)
        return run_audits(fresh, store_failures_in_lake=True)

    # Landed and audited once per run: the report is frozen, and each test gets its own copy of the lake
    # the failures were stored in (several tests mask or purge it).
    return lake_templates.copy("audit-failures-stored", build, Path(lake.base))


def test_every_row_of_each_failing_check_is_stored_under_the_runs_id(stored: AuditReport, lake: Lake) -> None:
    rows = read_failures(lake)
    failing = {r.name: r.rows_involved for r in stored.results if r.status.value != "pass"}
    per_check: dict[str, int] = {}
    for name in rows["check_name"].to_pylist():
        per_check[name] = per_check.get(name, 0) + 1
    assert per_check == failing
    assert set(rows["audit_id"].to_pylist()) == {stored.stored_failures and stored.stored_failures.audit_id}


def test_the_report_says_where_the_rows_were_stored(stored: AuditReport) -> None:
    assert stored.stored_failures is not None
    assert stored.stored_failures.dataset == AUDIT_FAILURES
    assert stored.stored_failures.rows == sum(
        r.rows_involved for r in stored.results if r.status.value != "pass"
    )


def test_a_stored_row_holds_the_finding_as_the_json_report_gives_it(stored: AuditReport, lake: Lake) -> None:
    rows = read_failures(lake).to_pylist()
    duplicate = [json.loads(r["row"]) for r in rows if r["check_name"] == "duplicate_active_rows"]
    assert duplicate == stored.result("duplicate_active_rows").rows


def test_a_finding_naming_a_second_user_stores_them_as_the_other_user(
    stored: AuditReport, lake: Lake
) -> None:
    rows = read_failures(lake).to_pylist()
    named = {
        (r["user_id"], r["other_user_id"]) for r in rows if r["check_name"] == "cleanup_names_active_account"
    }
    assert named == {("frank", "alice")}


def test_a_run_with_nothing_failing_stores_nothing(story: Story, lake: Lake) -> None:
    story.land(lake)
    report = run_audits(lake, store_failures_in_lake=True)
    assert report.stored_failures is not None and report.stored_failures.rows == 0
    assert read_failures(lake).num_rows == 0


def test_rows_of_checks_that_pass_under_their_thresholds_are_not_stored(story: Story, lake: Lake) -> None:
    plant_duplicate(story)
    story.land(lake)
    lenient = load_config().model_copy(
        update={"checks": {"duplicate_active_rows": Thresholds(), "duplicate_active_rows_ever": Thresholds()}}
    )
    run_audits(lake, lenient, store_failures_in_lake=True)
    assert read_failures(lake).num_rows == 0


def test_the_erasure_purge_deletes_the_stored_rows_of_the_user_and_the_holdings_check_sees_it(
    stored: AuditReport, lake: Lake
) -> None:
    eraser = AnalyticsLakeEraser(lake)
    assert eraser.holds("mallory") is True
    eraser.purge(["mallory"])
    assert "mallory" not in read_failures(lake)["user_id"].to_pylist()
    assert eraser.holds("mallory") is False


def test_the_purge_reaches_a_user_named_only_as_the_other_user(stored: AuditReport, lake: Lake) -> None:
    eraser = AnalyticsLakeEraser(lake)
    eraser.purge(["alice"])
    assert "alice" not in read_failures(lake)["other_user_id"].to_pylist()
    assert not any(b"alice" in path.read_bytes() for path in (lake_files(lake)))


def lake_files(lake: Lake) -> list[Path]:
    root = Path(lake.base) / AUDIT_FAILURES
    return [p for p in root.rglob("*") if p.is_file()]


def _view_rows(
    lake: Lake, *, mask: Iterable[str] = (), as_of: datetime | None = None
) -> list[dict[str, Any]]:
    con = connect(lake, views=["audit_failures"], mask=mask, as_of=as_of)
    try:
        rows: list[dict[str, Any]] = run_read_only(
            con, "SELECT * FROM audit_failures ORDER BY check_name, row_number"
        ).to_pylist()
        return rows
    finally:
        con.close()


def test_the_view_audit_failures_holds_the_stored_rows(stored: AuditReport, lake: Lake) -> None:
    stored_rows = sorted(read_failures(lake).to_pylist(), key=lambda r: (r["check_name"], r["row_number"]))
    assert _view_rows(lake) == stored_rows


def test_the_view_is_there_with_no_rows_before_any_audit_stored_some(story: Story, lake: Lake) -> None:
    story.land(lake)
    con = connect(lake, views=["audit_failures"])
    columns = [name for name, *_ in con.execute("DESCRIBE audit_failures").fetchall()]
    assert columns == AUDIT_FAILURES_SCHEMA.names
    assert con.execute("SELECT count(*) FROM audit_failures").fetchall() == [(0,)]


def test_the_view_hides_a_masked_user_whether_the_finding_is_theirs_or_names_them(
    stored: AuditReport, lake: Lake
) -> None:
    AnalyticsLakeEraser(lake).mask(["frank", "alice"])
    rows = _view_rows(lake)
    assert rows and all(r["user_id"] not in {"frank", "alice"} for r in rows)
    assert all(r["other_user_id"] is None and r["pk"] != "USER#frank" for r in rows)


def test_the_view_hides_users_a_caller_masks_as_every_view_does(stored: AuditReport, lake: Lake) -> None:
    assert {r["user_id"] for r in _view_rows(lake, mask=["mallory"])} == {"frank"}


def test_the_view_as_of_an_instant_holds_the_rows_of_the_audits_run_by_then(story: Story, lake: Lake) -> None:
    plant_duplicate(story)
    story.land(lake)
    ran_at = story.now + timedelta(days=1)
    run_audits(lake, store_failures_in_lake=True, clock=lambda: ran_at)
    assert _view_rows(lake, as_of=ran_at - timedelta(seconds=1)) == []
    assert len(_view_rows(lake, as_of=ran_at)) == len(_view_rows(lake)) > 0


def test_entitlements_sql_queries_the_stored_failures_and_their_findings(
    stored: AuditReport, lake: Lake
) -> None:
    query = (
        "SELECT check_name, \"row\"->>'array_account_id' AS account FROM audit_failures "
        "WHERE check_name = 'cleanup_names_active_account'"
    )
    result = CliRunner().invoke(
        cli, ["sql", query, "--format", "json"], env={"ENTITLEMENTS_LAKE__ROOT": lake.uri}
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"check_name": "cleanup_names_active_account", "account": "acct-a1"}]

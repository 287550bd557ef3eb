"""analytics/mining/_reports.py: the reports' SQL files and their headers."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.mining import MINING_SQL_DIR, ChartSpec, ReportDefinitionError, load_reports


def test_the_reports_are_the_ones_the_issue_asks_for_in_order() -> None:
    assert [r.name for r in load_reports()] == [
        "active_over_time",
        "daily_activity",
        "reactivation_grace",
        "accounts_per_user",
        "cleanup_latency",
        "stale_account_rate",
    ]


def test_every_report_has_a_title_a_description_and_a_chart() -> None:
    for report in load_reports():
        assert report.title and report.description and report.chart is not None, report.name
        assert report.sql_file == f"analytics/sql/mining/{report.name}.sql"


def test_cleanup_latency_says_how_a_simulated_clock_stretches_real_lag() -> None:
    (latency,) = [r for r in load_reports() if r.name == "cleanup_latency"]
    assert "simulated clock" in latency.description and "seconds of real lag" in latency.description


def test_a_chart_header_names_its_kind_axis_and_series() -> None:
    (daily,) = [r for r in load_reports() if r.name == "daily_activity"]
    assert daily.chart == ChartSpec(
        kind="stacked",
        x="day",
        y=("signups", "second_signups", "cancellations", "reactivations"),
        clock="business",
    )


def test_a_chart_without_its_one_clock_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.sql").write_text("-- report: odd\n-- title: t\n-- chart: line day -> n\nSELECT 1\n")
    with pytest.raises(ReportDefinitionError, match="names its one clock"):
        load_reports(tmp_path)


def test_a_malformed_chart_header_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.sql").write_text("-- report: odd\n-- title: t\n-- chart: pie x\nSELECT 1\n")
    with pytest.raises(ReportDefinitionError, match="chart"):
        load_reports(tmp_path)


def test_the_shared_views_file_is_not_a_report() -> None:
    assert (MINING_SQL_DIR / "_base.sql").exists()
    assert "_base" not in {r.name for r in load_reports()}

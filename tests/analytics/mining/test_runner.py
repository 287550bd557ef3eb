"""analytics/mining/_runner.py and analytics/sql/mining/*.sql: each report over a known history.

The history (tests/analytics/audits/story.py, `clean_story`), in business time:
06-01 alice signs up; bob signs up and cancels; 06-04 bob reactivates; carol signs up; 06-05 carol
cancels; dave signs up and signs up again (acct-d1 Superseded, a 1-day stale record); 06-06 that record
expires, acct-d1 is deleted and Removed; 06-08 erin signs up twice; 06-09 her stale record expires (a
cleanup parked, retried, deleted) and acct-e1 is Removed; 08-07 carol's 63-day record expires, acct-c1 is
deleted and Removed; frank signs up.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from analytics.lake import Lake, LakeMissing, open_lake
from analytics.lake.views import connect
from analytics.mining import MiningError, load_reports, report_charts, run_report
from config import PolicySettings
from tests.analytics.audits.story import Story, clean_story
from tests.support.lake_templates import LakeTemplates


@pytest.fixture
def landed(lake: Lake, lake_templates: LakeTemplates) -> Lake:
    # The clean story is the same every time: landed once per run, copied into this test's lake.
    lake_templates.copy("clean-story", lambda fresh: clean_story().land(fresh), Path(lake.base))
    return lake


def rows(lake: Lake, report: str) -> list[dict[str, Any]]:
    return run_report(lake, report).table.to_pylist()


def by(rows: list[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    return {row.pop(key): row for row in rows}


def test_every_report_answers_no_rows_when_every_user_is_hidden(landed: Lake) -> None:
    users = [u for (u,) in connect(landed, views=["users"]).execute("SELECT user_id FROM users").fetchall()]
    counts = {
        report.name: run_report(landed, report.name, mask=users).table.num_rows for report in load_reports()
    }
    assert counts == dict.fromkeys(counts, 0)


def test_a_report_on_a_lake_with_no_data_raises_lake_missing(lake: Lake) -> None:
    with pytest.raises(LakeMissing, match="run `entitlements consume`"):
        run_report(lake, "daily_activity")


def test_active_over_time_counts_each_status_at_the_end_of_every_day(landed: Lake) -> None:
    days = by(rows(landed, "active_over_time"), "day")
    assert len(days) == (date(2030, 8, 7) - date(2030, 6, 1)).days + 1
    columns = ("active", "cancelled", "superseded", "removed", "active_users")
    assert tuple(days[date(2030, 6, 1)][c] for c in columns) == (1, 1, 0, 0, 1)
    assert tuple(days[date(2030, 6, 5)][c] for c in columns) == (3, 1, 1, 0, 3)
    assert tuple(days[date(2030, 7, 1)][c] for c in columns) == (4, 1, 0, 2, 4)
    assert tuple(days[date(2030, 8, 7)][c] for c in columns) == (5, 0, 0, 3, 5)


def test_active_users_count_a_user_with_two_active_rows_once(lake: Lake) -> None:
    story = Story()
    story.signup("mallory", "acct-m1")
    story.signup("mallory", "acct-m2")
    story.land(lake)
    (day,) = rows(lake, "active_over_time")
    assert (day["active"], day["active_users"]) == (2, 1)


def test_daily_activity_tells_signups_second_signups_cancellations_and_reactivations(landed: Lake) -> None:
    days = by(rows(landed, "daily_activity"), "day")
    columns = ("signups", "second_signups", "cancellations", "reactivations", "rows_removed")
    assert {d: tuple(v[c] for c in columns) for d, v in days.items()} == {
        date(2030, 6, 1): (2, 0, 1, 0, 0),
        date(2030, 6, 4): (1, 0, 0, 1, 0),
        date(2030, 6, 5): (1, 1, 1, 0, 0),
        date(2030, 6, 6): (0, 0, 0, 0, 1),
        date(2030, 6, 8): (1, 1, 0, 0, 0),
        date(2030, 6, 9): (0, 0, 0, 0, 1),
        date(2030, 8, 7): (1, 0, 0, 0, 1),
    }


def test_reactivation_grace_buckets_each_cancellation_by_what_followed(landed: Lake) -> None:
    buckets = by(rows(landed, "reactivation_grace"), "bucket")
    assert {b: (v["cancellations"], v["share_pct"]) for b, v in buckets.items()} == {
        "reactivated in days 0-6": (1, 50.0),
        "not reactivated: cleaned up": (1, 50.0),
    }


def test_a_cancellation_neither_reactivated_nor_cleaned_up_is_pending(lake: Lake) -> None:
    story = Story()
    story.signup("zoe", "acct-z1")
    story.cancel("zoe")
    story.land(lake)
    assert [(r["bucket"], r["cancellations"]) for r in rows(lake, "reactivation_grace")] == [
        ("not reactivated: pending", 1)
    ]


def test_accounts_per_user_counts_users_by_accounts_ever_named(landed: Lake) -> None:
    accounts = by(rows(landed, "accounts_per_user"), "accounts")
    assert {a: (v["users"], v["active_now"]) for a, v in accounts.items()} == {"1": (4, 3), "2": (2, 2)}


def test_cleanup_latency_measures_each_step_per_cleanup_kind(landed: Lake) -> None:
    stages = by(rows(landed, "cleanup_latency"), "stage")
    assert stages["cancellation: scheduled -> due"]["p50_hours"] == 63 * 24
    assert stages["stale: scheduled -> due"]["p50_hours"] == 24
    assert stages["stale: due -> handled"]["p50_hours"] == 1
    assert stages["cancellation: scheduled -> row Removed"]["p50_hours"] == 63 * 24 + 1
    assert stages["stale: handled -> account deleted"]["max_hours"] == pytest.approx(10 / 60, abs=0.01)
    assert {v["cleanups"] for v in stages.values()} == {1, 2}


def test_every_report_keeps_to_its_one_clock_when_the_stream_clock_runs_years_apart(
    landed: Lake, tmp_path: Path
) -> None:
    story = clean_story()
    # The demo's case: the stream's clock (real time) years away from the simulated business clock.
    story.events = [
        msgspec.structs.replace(e, created_at=e.created_at - timedelta(days=4 * 365)) for e in story.events
    ]
    shifted = open_lake(str(tmp_path / "shifted"))
    story.land(shifted)
    differing = [r.name for r in load_reports() if rows(shifted, r.name) != rows(landed, r.name)]
    assert differing == []


def test_a_chart_names_its_one_clock_in_its_title(landed: Lake) -> None:
    (chart,) = report_charts(run_report(landed, "cleanup_latency"))
    assert chart.title.endswith("(business time)")


def test_the_stale_account_rate_is_stale_records_over_accounts_linked(landed: Lake) -> None:
    days = by(rows(landed, "stale_account_rate"), "day")
    assert (days[date(2030, 6, 5)]["accounts_linked"], days[date(2030, 6, 5)]["accounts_made_stale"]) == (
        2,
        1,
    )
    assert days[date(2030, 6, 5)]["stale_rate_pct"] == 50.0
    assert days[date(2030, 8, 7)]["cumulative_rate_pct"] == 25.0


def test_the_grace_period_comes_from_the_policy(lake: Lake) -> None:
    story = Story()
    story.signup("zoe", "acct-z1")
    story.cancel("zoe")
    story.tick(days=10)
    story.reactivate("zoe")
    story.land(lake)
    result = run_report(lake, "reactivation_grace", policy=PolicySettings(cleanup_ttl_days=7))
    assert [r["bucket"] for r in result.table.to_pylist()] == ["reactivated after the grace period"]


def test_an_unknown_report_is_refused(lake: Lake) -> None:
    with pytest.raises(MiningError, match="unknown report"):
        run_report(lake, "nope")

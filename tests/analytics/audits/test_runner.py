"""analytics/audits/_runner.py: what run_audits reads (snapshot, log, an instant), thresholds, limits."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from analytics import AnalyticsLakeEraser
from analytics.audits import AuditConfig, AuditParameters, AuditReport, Status, run_audits
from analytics.audits import render_report as render
from analytics.audits._config import Thresholds
from analytics.audits._runner import AuditError
from analytics.lake import Lake, LakeMissing, NoDataAsOf, open_lake
from analytics.lake.snapshots import snapshot
from schema.table import entitlement_key
from tests.analytics.audits.conftest import found
from tests.analytics.audits.story import TOKEN_CANARY, Story
from tests.analytics.lake.delta_files import data_files

Audit = Callable[..., AuditReport]


def plant_duplicate(story: Story, user: str = "mallory") -> None:
    story.signup(user, f"{user}-1")
    story.tick(hours=1)
    story.signup(user, f"{user}-2")


def test_now_checks_read_the_latest_snapshot_when_there_is_one(story: Story, lake: Lake) -> None:
    plant_duplicate(story)
    story.land(lake)
    snapshot(lake)
    report = run_audits(lake)
    assert report.source == "snapshot"
    assert found(report)["duplicate_active_rows"] == 2


def test_changes_landed_after_the_snapshot_are_part_of_now(story: Story, lake: Lake) -> None:
    story.land(lake)
    snapshot(lake)
    later = Story(now=story.now, items=dict(story.items), sequence=story.sequence)
    plant_duplicate(later)
    later.land(lake)
    report = run_audits(lake)
    assert report.source == "snapshot"
    assert found(report) == {"duplicate_active_rows": 2, "duplicate_active_rows_ever": 2}


@pytest.mark.parametrize("later_changes", [False, True], ids=["snapshot alone", "snapshot and later changes"])
def test_now_checks_over_the_snapshot_hide_masked_users_and_find_what_the_log_finds(
    story: Story, lake: Lake, later_changes: bool
) -> None:
    plant_duplicate(story, "mallory")
    plant_duplicate(story, "erin")
    story.land(lake)
    snapshot(lake)
    if later_changes:
        later = Story(now=story.now, items=dict(story.items), sequence=story.sequence)
        plant_duplicate(later, "trudy")
        later.land(lake)
    AnalyticsLakeEraser(lake).mask(["erin"])

    from_snapshot = run_audits(lake, checks=["duplicate_active_rows"])
    from_log = run_audits(lake, checks=["duplicate_active_rows"], from_snapshot=False)

    assert from_snapshot.source == "snapshot"
    rows = from_snapshot.result("duplicate_active_rows").rows
    assert {row["user_id"] for row in rows} == ({"mallory", "trudy"} if later_changes else {"mallory"})
    assert rows == from_log.result("duplicate_active_rows").rows


def test_from_log_folds_the_whole_log_even_with_a_snapshot(story: Story, lake: Lake) -> None:
    story.land(lake)
    snapshot(lake)
    report = run_audits(lake, from_snapshot=False)
    assert report.source == "log" and found(report) == {}


def plant_duplicate_fixed_later(story: Story, lake: Lake) -> datetime:
    """A duplicate Active row, superseded ten minutes on; lands the story and returns an instant between."""
    plant_duplicate(story)
    during = story.tick(minutes=5)
    story.tick(minutes=5)
    story.set_status("mallory", "mallory-1", "Superseded")
    story.land(lake)
    return during


def test_as_of_audits_the_state_and_history_at_that_instant(story: Story, lake: Lake) -> None:
    during = plant_duplicate_fixed_later(story, lake)
    assert "duplicate_active_rows" not in found(run_audits(lake))
    report = run_audits(lake, as_of=during)
    assert report.source == "log" and report.as_of == during
    assert found(report) == {"duplicate_active_rows": 2, "duplicate_active_rows_ever": 2}


def test_as_of_keeps_only_outcomes_answering_changes_up_to_then(story: Story, lake: Lake) -> None:
    record = story.cancel("frank")
    before = story.tick(minutes=1)
    story.expire(dict(record.keys), final=None)
    story.land(lake)
    report = run_audits(lake, as_of=before)
    # The clean story's 8 cleanup outcomes and its 8 accounts created (6 signups, 2 second signups).
    assert report.outcome_rows == 16 and found(report) == {}


def test_a_check_is_an_error_at_its_error_threshold_and_a_warning_at_its_warn_one(
    story: Story, audit: Audit
) -> None:
    plant_duplicate(story, "mallory")
    plant_duplicate(story, "oscar")
    config = AuditConfig(
        checks={
            "duplicate_active_rows": Thresholds(warn=1, error=3),
            "duplicate_active_rows_ever": Thresholds(warn=2, error=2),
        }
    )
    report = audit(story, config=config)
    assert report.result("duplicate_active_rows").status is Status.WARN
    assert report.result("duplicate_active_rows_ever").status is Status.ERROR
    assert report.status is Status.ERROR and report.exit_code == 1


def test_warnings_alone_exit_zero(story: Story, audit: Audit) -> None:
    plant_duplicate(story)
    config = AuditConfig(
        checks={"duplicate_active_rows": Thresholds(warn=1), "duplicate_active_rows_ever": Thresholds(warn=1)}
    )
    report = audit(story, config=config)
    assert report.status is Status.WARN and report.exit_code == 0


def test_a_check_without_thresholds_never_fails(story: Story, audit: Audit) -> None:
    plant_duplicate(story)
    report = audit(story, config=AuditConfig())
    assert report.result("duplicate_active_rows").count == 1
    assert report.status is Status.PASS


def test_rows_shown_are_capped_and_marked_truncated(story: Story, audit: Audit) -> None:
    for user in ("m1", "m2", "m3"):
        plant_duplicate(story, user)
    config = AuditConfig(parameters=AuditParameters(max_rows=4))
    result = audit(story, config=config).result("duplicate_active_rows")
    assert (len(result.rows), result.rows_involved, result.rows_truncated) == (4, 6, True)


def test_findings_are_dated_by_the_checks_time_column(story: Story, audit: Audit) -> None:
    plant_duplicate(story)
    result = audit(story).result("duplicate_active_rows")
    assert result.timeline == {story.now.date().isoformat(): 2}


def test_only_the_checks_named_run(story: Story, audit: Audit) -> None:
    report = audit(story, checks=["stale_write", "guard_refusals"])
    assert [r.name for r in report.results] == ["stale_write", "guard_refusals"]


def test_an_unknown_check_is_refused(story: Story, audit: Audit) -> None:
    with pytest.raises(AuditError, match="unknown checks: no_such_check"):
        audit(story, checks=["no_such_check"])


def test_an_unreadable_lake_is_an_audit_error(story: Story, lake: Lake) -> None:
    story.land(lake)
    broken = Path(lake.base) / data_files(lake, "changes")[0]  # a file the table's log names
    broken.write_bytes(b"not parquet at all")
    with pytest.raises(AuditError):
        run_audits(lake)


def test_no_processor_token_reaches_any_rendering(story: Story, audit: Audit) -> None:
    plant_duplicate(story)
    report = audit(story)
    assert any(TOKEN_CANARY in str(e.new_item) for e in story.events)
    for fmt in ("markdown", "json", "html"):
        assert "PTOK" not in render(report, fmt)


def test_replayed_events_in_other_files_are_counted_once(story: Story, lake: Lake) -> None:
    plant_duplicate(story)
    story.delete(entitlement_key("frank", "acct-f1"))
    story.land(lake, flush_rows=5)
    story.land(lake, flush_rows=9)  # a replay: the same events, batched differently
    report = run_audits(lake)
    assert found(report) == {
        "duplicate_active_rows": 2,
        "duplicate_active_rows_ever": 2,
        "unexpected_delete": 1,
    }
    assert report.result("duplicate_active_rows").surplus_rows == 1


def test_each_check_run_alone_finds_what_it_finds_in_a_full_run(story: Story, lake: Lake) -> None:
    plant_duplicate(story)
    story.signup("oscar", "oscar-1")
    story.cancel("oscar", ttl="1772697600")  # a ttl DynamoDB never acts on
    story.signup("trent", "trent-1")
    story.set_status("trent", "trent-1", "Removed")  # removed with no cleanup behind it
    story.land(lake)
    snapshot(lake)
    full = run_audits(lake)
    assert len(found(full)) >= 3

    for result in full.results:
        alone = run_audits(lake, checks=[result.name]).result(result.name)
        assert (alone.rows_involved, alone.rows) == (result.rows_involved, result.rows), result.name


def test_a_check_run_alone_as_of_an_instant_reads_the_log_to_then(story: Story, lake: Lake) -> None:
    during = plant_duplicate_fixed_later(story, lake)

    report = run_audits(lake, as_of=during, checks=["duplicate_active_rows"])

    assert found(report) == {"duplicate_active_rows": 2}


def test_a_lake_folder_with_no_data_is_refused_not_passed(tmp_path: Path) -> None:
    empty = open_lake(str(tmp_path / "lake"))
    with pytest.raises(LakeMissing, match="entitlements consume"):
        run_audits(empty)


def test_an_instant_before_the_first_change_is_refused_not_passed(story: Story, lake: Lake) -> None:
    first = Story().now
    story.land(lake)
    with pytest.raises(NoDataAsOf, match="--as-of"):
        run_audits(lake, as_of=first - timedelta(days=1))


def test_each_result_carries_its_checks_remediation_and_docs(story: Story, audit: Audit) -> None:
    report = audit(story)
    assert all(r.remediation and r.docs[0].endswith(f"#{r.name}") for r in report.results)

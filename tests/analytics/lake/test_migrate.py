"""analytics/lake/migrate.py: an old-format lake becomes Delta tables in place, resumably, and answers the
same audit as the same history landed on Delta; nothing of the old format is left."""

from __future__ import annotations

import contextlib
from pathlib import Path
from unittest import mock

from typer.testing import CliRunner

from analytics.audits import run_audits
from analytics.lake import Lake, open_lake
from analytics.lake import migrate as migrate_module
from analytics.lake.migrate import migrate, old_format_files
from analytics.views import connect
from entitlements.cli import app
from tests.analytics.audits.story import Story, clean_story
from tests.analytics.lake.old_format import write_old_lake


def _story() -> Story:
    story = clean_story()
    story.signup("mallory", "acct-m1")  # a finding for the audit to report: two Active rows
    story.tick(minutes=5)
    story.signup("mallory", "acct-m2")
    return story


def _findings(lake: Lake) -> dict[str, int]:
    report = run_audits(lake)
    return {r.name: r.rows_involved for r in report.results}


def test_a_migrated_lake_answers_the_same_audit_as_one_landed_on_delta(tmp_path: Path) -> None:
    story = _story()
    write_old_lake(str(tmp_path / "old"), story.events, story.outcomes)
    old = open_lake(str(tmp_path / "old"))
    migrate(old)
    landed = open_lake(str(tmp_path / "delta"))
    story.land(landed)
    findings = _findings(old)
    assert findings == _findings(landed)
    assert findings["duplicate_active_rows"] > 0


def test_nothing_of_the_old_format_is_left_and_a_second_run_does_nothing(tmp_path: Path) -> None:
    story = _story()
    written = write_old_lake(str(tmp_path / "old"), story.events, story.outcomes)
    lake = open_lake(str(tmp_path / "old"))
    assert old_format_files(lake)
    first = migrate(lake)
    assert first.rows_migrated["changes"] == len(story.events) < written  # the replay migrated once
    assert old_format_files(lake) == []
    again = migrate(lake)
    assert not any(again.commits.values()) and again.files_deleted == 0
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM raw_changes").fetchall() == [(len(story.events),)]
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(story.events),)]


def test_a_migration_that_died_after_a_commit_resumes_without_landing_twice(tmp_path: Path) -> None:
    story = _story()
    write_old_lake(str(tmp_path / "old"), story.events, story.outcomes)
    lake = open_lake(str(tmp_path / "old"))
    with (
        mock.patch.object(migrate_module, "_delete", side_effect=RuntimeError("killed")),
        contextlib.suppress(RuntimeError),
    ):
        migrate(lake)  # dies after its first commit, before deleting the files it migrated
    migrate(lake)
    assert old_format_files(lake) == []
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM raw_changes").fetchall() == [(len(story.events),)]
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(story.events),)]


def test_the_migrate_command_converts_the_lake_and_says_nothing_is_left(tmp_path: Path) -> None:
    story = _story()
    write_old_lake(str(tmp_path / "old"), story.events, story.outcomes)
    result = CliRunner().invoke(
        app, ["lake", "migrate"], env={"ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "old")}
    )
    assert result.exit_code == 0, result.output
    assert "old-format files left: 0" in result.output

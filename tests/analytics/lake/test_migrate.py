"""analytics/lake/migrate.py: an old-format lake becomes Delta tables in place, resumably, and answers the
same audit as the same history landed on Delta; nothing of the old format is left."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from analytics.audits import run_audits
from analytics.lake import Lake, LakeHandler, open_lake
from analytics.lake import migrate as migrate_module
from analytics.lake._errors import TableLogMissing
from analytics.lake._files import read_bytes
from analytics.lake._schema import CHANGE_IDENTITY
from analytics.lake.migrate import migrate, old_format_files
from analytics.lake.snapshots import snapshot
from analytics.lake.views import connect
from config import LakeSettings
from entitlements.cli import app
from tests.analytics.audits.story import Story, clean_story
from tests.analytics.lake.old_format import write_old_lake
from tests.analytics.lakesim import TableSim


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


def _shuffled_old_lake(root: str) -> TableSim:
    """An old lake of two shards whose files hold a replay twice, each file's rows out of order."""
    sim = TableSim(shards=("shardId-00000001-aaaa", "shardId-00000002-bbbb"), seed=7)
    sim.random_history(users=12, operations=200)
    written = write_old_lake(root, sim.events, sim.outcomes, shuffle_seed=3)
    assert written > len(sim.events)  # the replay: the old files hold events twice
    return sim


def _old_identities(root: str) -> list[tuple[Any, ...]]:
    """Every change row's identity in the old files, read straight from them (duplicates kept)."""
    found: list[tuple[Any, ...]] = []
    for folder, _, names in os.walk(os.path.join(root, "changes")):
        for name in names:
            if name.endswith(".parquet") and not name.startswith("_"):
                columns = pq.read_table(os.path.join(folder, name), columns=list(CHANGE_IDENTITY))
                found += zip(*(columns[c].to_pylist() for c in CHANGE_IDENTITY), strict=True)
    return found


def _placed(local_root: str, lake: Lake) -> Lake:
    """The old lake written at `local_root`, at `lake`'s root (copied there when `lake` is on S3)."""
    if lake.is_local:
        return open_lake(local_root)
    pafs.copy_files(local_root, lake.base, destination_filesystem=lake.fs)
    return lake


def test_a_migrated_lake_holds_each_distinct_event_of_the_old_files_once(
    tmp_path: Path, any_lake: Lake
) -> None:
    root = str(tmp_path / "old")
    _shuffled_old_lake(root)
    before = _old_identities(root)
    lake = _placed(root, any_lake)
    migrate(lake)
    identity = ", ".join(CHANGE_IDENTITY)
    after = connect(lake).execute(f"SELECT {identity} FROM raw_changes").fetchall()
    assert sorted(after) == sorted(set(before))  # none lost, none kept twice


def _answers(lake: Lake) -> dict[str, list[tuple[Any, ...]]]:
    """Every view's rows, sorted; a row's `filename` (which data file holds it) left out, `change_files`
    (one row per data file) by its row total and a view of file names alone by its count: file layouts
    differ by design."""
    con = connect(lake)
    answers: dict[str, list[tuple[Any, ...]]] = {}
    views = [v for (v,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
    for view in views:
        if view == "change_files":
            answers[view] = con.execute("SELECT sum(rows) FROM change_files").fetchall()
            continue
        columns = [c[0] for c in con.execute(f"SELECT * FROM {view} LIMIT 0").description]
        if columns == ["filename"]:
            answers[view] = con.execute(f"SELECT count(*) FROM {view}").fetchall()
            continue
        select = "* EXCLUDE (filename)" if "filename" in columns else "*"
        answers[view] = sorted(con.execute(f"SELECT {select} FROM {view}").fetchall(), key=repr)
    return answers


def test_every_view_of_a_migrated_lake_answers_as_the_same_history_landed_on_delta(
    tmp_path: Path, any_lake: Lake
) -> None:
    sim = _shuffled_old_lake(str(tmp_path / "old"))
    old = _placed(str(tmp_path / "old"), any_lake)
    migrate(old)
    landed = open_lake(str(tmp_path / "delta"))
    handler = LakeHandler(landed, LakeSettings(flush_rows=9))
    for event in sim.events:
        handler.add(event)
    for outcome in sim.outcomes:
        handler.add_outcome(outcome)
    handler.flush()
    snapshot(landed, full=True)  # as migrate rebuilds the old lake's snapshot
    migrated, expected = _answers(old), _answers(landed)
    assert set(migrated) == set(expected) and len(migrated) > 10
    for view, rows in expected.items():
        assert migrated[view] == rows, view
    assert expected["changes"] and expected["entitlements"]


def _every_file(lake: Lake) -> dict[str, bytes]:
    selector = pafs.FileSelector(lake.base, recursive=True)
    return {
        info.path: read_bytes(lake, lake.relative(info.path))
        for info in lake.fs.get_file_info(selector)
        if info.type == pafs.FileType.File
    }


def _lose_changes_log(lake: Lake) -> dict[str, bytes]:
    """Land a little into `lake`, then delete its `changes` table's `_delta_log`; returns every file's
    bytes after."""
    sim = TableSim(shards=("shardId-00000001-aaaa",), seed=5)
    sim.random_history(users=4, operations=30)
    handler = LakeHandler(lake, LakeSettings(flush_rows=10))
    for event in sim.events:
        handler.add(event)
    handler.flush()
    lake.fs.delete_dir(lake.path("changes/_delta_log"))
    return _every_file(lake)


def test_a_table_whose_log_is_lost_is_refused_naming_it_and_nothing_is_touched(any_lake: Lake) -> None:
    files = _lose_changes_log(any_lake)
    assert any("/changes/" in path for path in files)  # its data files are there
    with pytest.raises(TableLogMissing, match=r"no _delta_log in changes:") as refused:
        migrate(any_lake)
    assert refused.value.tables == ["changes"]
    assert _every_file(any_lake) == files


def test_the_migrate_command_refuses_a_lost_log_in_one_line_with_a_non_zero_exit(tmp_path: Path) -> None:
    _lose_changes_log(open_lake(str(tmp_path / "lake")))
    result = CliRunner().invoke(
        app, ["lake", "migrate"], env={"ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake")}
    )
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "no _delta_log in changes" in lines[0], result.output

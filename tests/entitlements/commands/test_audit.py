"""entitlements/commands/audit.py: `entitlements audit` on the settings' lake, and its exit status."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from analytics.audits import read_failures
from analytics.lake import open_lake
from analytics.lake.eraser import AnalyticsLakeEraser
from config import load_settings
from entitlements.cli import app as cli
from entitlements.commands.audit import app
from processors.erasure import LEDGER_DIR_NAME, ErasureLedger
from schema.table import entitlement_key
from tests.analytics.audits.story import Story, clean_story
from tests.analytics.lake.delta_files import data_files


def land(tmp_path: Path, story: Story) -> dict[str, str]:
    lake = open_lake(str(tmp_path / "lake"))
    story.land(lake)
    return {"ENTITLEMENTS_LAKE__ROOT": lake.uri, "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state")}


def duplicate(story: Story) -> Story:
    story.signup("mallory", "acct-m1")
    story.tick(minutes=5)
    story.signup("mallory", "acct-m2")
    return story


def invoke(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(app, ["audit", *args], env=env)


def test_audit_is_a_top_level_command_of_the_cli() -> None:
    result = CliRunner().invoke(cli, ["audit", "--help"])
    assert result.exit_code == 0 and "--as-of" in result.stdout


def test_a_clean_lake_exits_zero_with_a_markdown_report(tmp_path: Path) -> None:
    result = invoke(land(tmp_path, clean_story()))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Entitlements audit: PASS")


def test_a_finding_past_its_error_threshold_exits_one(tmp_path: Path) -> None:
    result = invoke(land(tmp_path, duplicate(clean_story())), "--format", "json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    found = {r["name"] for r in report["results"] if r["rows_involved"]}
    assert found == {"duplicate_active_rows", "duplicate_active_rows_ever"}


def test_thresholds_from_a_file_can_make_a_finding_a_warning(tmp_path: Path) -> None:
    thresholds = tmp_path / "t.toml"
    thresholds.write_text(
        "[checks.duplicate_active_rows]\nwarn = 1\n[checks.duplicate_active_rows_ever]\nwarn = 1\n"
    )
    result = invoke(land(tmp_path, duplicate(clean_story())), "--thresholds", str(thresholds))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Entitlements audit: WARN")


def test_the_html_report_is_written_where_asked(tmp_path: Path) -> None:
    target = tmp_path / "out" / "audit.html"
    result = invoke(land(tmp_path, duplicate(clean_story())), "--format", "html", "--output", str(target))
    assert result.exit_code == 1
    assert "audit: ERROR (2 error, 0 warn, 21 pass); report written to" in result.stdout
    assert target.read_text().startswith("<!DOCTYPE html>")


def test_as_of_audits_an_earlier_instant(tmp_path: Path) -> None:
    story = clean_story()
    before = story.now.isoformat()
    story.tick(minutes=5)
    env = land(tmp_path, duplicate(story))
    assert invoke(env, "--as-of", before).exit_code == 0
    assert invoke(env).exit_code == 1


def test_erased_users_are_excepted_from_the_delete_checks(tmp_path: Path) -> None:
    story = clean_story()
    story.delete(entitlement_key("frank", "acct-f1"))
    env = land(tmp_path, story)
    erased = tmp_path / "erased.txt"
    erased.write_text("# erased by request\nfrank\n")
    assert invoke(env, "--check", "unexpected_delete").exit_code == 1
    assert invoke(env, "--check", "unexpected_delete", "--erased-users", str(erased)).exit_code == 0


def test_the_erasure_ledger_excepts_the_users_it_records(tmp_path: Path) -> None:
    story = clean_story()
    story.delete(entitlement_key("frank", "acct-f1"))
    env = {**land(tmp_path, story), "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state")}
    ledger = ErasureLedger(tmp_path / "state" / LEDGER_DIR_NAME, load_settings().erasure.ledger_key)
    ledger.record_started("frank", datetime.now(UTC))
    assert invoke(env, "--check", "unexpected_delete").exit_code == 1
    assert invoke(env, "--check", "unexpected_delete", "--erasure-ledger").exit_code == 0


def one_line(result: Result) -> str:
    """The command's stderr, which must be one line (no traceback)."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_missing_lake_exits_two_naming_the_path_and_the_command_that_fills_it(tmp_path: Path) -> None:
    result = invoke({"ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "nowhere")})
    assert result.exit_code == 2
    line = one_line(result)
    assert str(tmp_path / "nowhere") in line and "entitlements consume" in line
    assert not (tmp_path / "nowhere").exists()


def test_a_lake_with_no_data_exits_two_naming_the_path_and_the_command_that_fills_it(tmp_path: Path) -> None:
    (tmp_path / "lake").mkdir()
    result = invoke({"ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake")})
    assert result.exit_code == 2
    line = one_line(result)
    assert str(tmp_path / "lake") in line and "entitlements consume" in line
    assert list((tmp_path / "lake").iterdir()) == []


def test_an_as_of_before_the_first_change_exits_two_with_one_line(tmp_path: Path) -> None:
    env = land(tmp_path, clean_story())
    result = invoke(env, "--as-of", "2001-01-01T00:00:00Z")
    assert result.exit_code == 2
    line = one_line(result)
    assert str(tmp_path / "lake") in line and "--as-of" in line


def test_junit_xml_is_written_for_ci(tmp_path: Path) -> None:
    target = tmp_path / "audit.xml"
    result = invoke(land(tmp_path, duplicate(clean_story())), "--format", "junit", "--output", str(target))
    assert result.exit_code == 1
    xml = target.read_text()
    assert xml.startswith('<?xml version="1.0" encoding="utf-8"?>') and 'failures="2"' in xml
    assert "mallory" not in xml


def test_store_failures_keeps_the_failing_rows_in_the_lake_and_says_so(tmp_path: Path) -> None:
    result = invoke(land(tmp_path, duplicate(clean_story())), "--store-failures", "--format", "json")
    assert result.exit_code == 1
    stored = json.loads(result.stdout)["stored_failures"]
    assert stored["dataset"] == "audits/failures" and stored["rows"] == 4
    assert f"4 failing rows stored in audits/failures, audit_id {stored['audit_id']}" in result.stderr
    rows = read_failures(open_lake(str(tmp_path / "lake")))
    assert set(rows["check_name"].to_pylist()) == {"duplicate_active_rows", "duplicate_active_rows_ever"}


def test_an_unreadable_erased_users_file_exits_two_naming_it(tmp_path: Path) -> None:
    result = invoke(land(tmp_path, clean_story()), "--erased-users", str(tmp_path / "missing.txt"))
    assert result.exit_code == 2
    assert str(tmp_path / "missing.txt") in one_line(result)


def test_an_unreadable_lake_exits_two(tmp_path: Path) -> None:
    env = land(tmp_path, clean_story())
    damaged = data_files(open_lake(str(tmp_path / "lake")), "changes")[0]  # a file the table's log names
    (tmp_path / "lake" / damaged).write_bytes(b"garbage")
    result = invoke(env)
    assert result.exit_code == 2
    assert f"the lake file {tmp_path / 'lake' / damaged} cannot be read" in one_line(result)


@pytest.mark.parametrize(
    "args",
    [("--as-of", "yesterday"), ("--check", "no_such_check"), ("--format", "pdf")],
    ids=["bad-instant", "unknown-check", "unknown-format"],
)
def test_a_bad_argument_exits_two(tmp_path: Path, args: tuple[str, ...]) -> None:
    assert invoke(land(tmp_path, clean_story()), *args).exit_code == 2


def test_an_unreadable_thresholds_file_exits_two(tmp_path: Path) -> None:
    result = invoke(land(tmp_path, clean_story()), "--thresholds", str(tmp_path / "missing.toml"))
    assert result.exit_code == 2 and str(tmp_path / "missing.toml") in one_line(result)


def test_users_being_erased_are_left_out_of_the_audit(tmp_path: Path) -> None:
    env = land(tmp_path, duplicate(clean_story()))
    AnalyticsLakeEraser(open_lake(str(tmp_path / "lake"))).mask(["mallory"])

    result = invoke(env, "--format", "json")

    assert result.exit_code == 0, result.output
    assert "mallory" not in result.stdout


def test_audit_failures_prints_the_stored_rows_of_a_run_as_json_lines(tmp_path: Path) -> None:
    env = land(tmp_path, duplicate(clean_story()))
    stored = json.loads(invoke(env, "--store-failures", "--format", "json").stdout)["stored_failures"]
    result = CliRunner().invoke(
        app, ["audit-failures", "--audit-id", stored["audit_id"], "--check", "duplicate_active_rows"], env=env
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["check_name"], line["row"]["user_id"]) for line in lines] == [
        ("duplicate_active_rows", "mallory"),
        ("duplicate_active_rows", "mallory"),
    ]
    assert {line["audit_id"] for line in lines} == {stored["audit_id"]}


def test_audit_failures_on_a_missing_lake_exits_two_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = CliRunner().invoke(app, ["audit-failures"], env={"ENTITLEMENTS_LAKE__ROOT": str(missing)})
    assert result.exit_code == 2 and str(missing) in one_line(result)


def test_an_audit_away_from_a_terminal_says_on_stderr_that_it_is_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import analytics.audits  # noqa: PLC0415
    from entitlements import _progress  # noqa: PLC0415
    from entitlements.commands import audit  # noqa: PLC0415

    told, line = threading.Event(), _progress._line
    monkeypatch.setattr(_progress, "_line", lambda step, elapsed: (told.set(), line(step, elapsed))[1])
    monkeypatch.setattr(audit, "LINE_SECONDS", 0.01)
    run = analytics.audits.run_audits

    def long_audit(*args: Any, **kwargs: Any) -> Any:
        told.wait(60)  # until a line is on its way: the audit is "long" whatever the load
        return run(*args, **kwargs)

    # The command imports run_audits from the face when it runs (kept off --help): patched there.
    monkeypatch.setattr(analytics.audits, "run_audits", long_audit)
    result = invoke(land(tmp_path, clean_story()), "--format", "json")
    assert result.exit_code == 0, result.output
    assert any(text.startswith("auditing the lake: ") for text in result.stderr.splitlines())
    assert json.loads(result.stdout)["status"] == "pass"

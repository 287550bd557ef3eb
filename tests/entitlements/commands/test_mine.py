"""entitlements/commands/mine.py: `entitlements mine REPORT` and `entitlements mine --list`."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from analytics.lake import open_lake
from analytics.lake.eraser import AnalyticsLakeEraser
from analytics.mining import load_reports
from entitlements.cli import app as cli
from tests.analytics.audits.story import clean_story


def landed(tmp_path: Path) -> dict[str, str]:
    lake = open_lake(str(tmp_path / "lake"))
    clean_story().land(lake)
    return {"ENTITLEMENTS_LAKE__ROOT": lake.uri, "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state")}


def invoke(env: dict[str, str], *args: str) -> Result:
    """`entitlements mine ARGS` through the CLI's root (its one-line errors)."""
    return CliRunner().invoke(cli, ["mine", *args], env=env)


def test_mine_is_a_top_level_command_of_the_cli() -> None:
    result = CliRunner().invoke(cli, ["mine", "--list"])
    assert result.exit_code == 0 and "daily_activity" in result.stdout


def test_list_names_every_report_with_its_title() -> None:
    lines = invoke({}, "--list").stdout.splitlines()
    assert [line.split()[0] for line in lines] == [r.name for r in load_reports()]
    assert "Reactivation within the grace period" in lines[2]


def test_a_report_prints_as_a_table_by_default(tmp_path: Path) -> None:
    result = invoke(landed(tmp_path), "accounts_per_user")
    assert result.exit_code == 0, result.output
    assert "Array accounts per user" in result.stdout


def test_a_report_prints_as_json(tmp_path: Path) -> None:
    result = invoke(landed(tmp_path), "daily_activity", "--format", "json")
    assert json.loads(result.stdout)["rows"][0]["signups"] == 2


def test_markdown_written_to_a_file_gets_its_chart_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "out" / "latency.md"
    result = invoke(landed(tmp_path), "cleanup_latency", "--format", "markdown", "--output", str(target))
    assert result.exit_code == 0, result.output
    assert "(latency.chart1.png)" in target.read_text()
    assert (tmp_path / "out" / "latency.chart1.png").read_bytes().startswith(b"\x89PNG")


def test_html_is_written_where_asked(tmp_path: Path) -> None:
    target = tmp_path / "active.html"
    assert (
        invoke(landed(tmp_path), "active_over_time", "--format", "html", "--output", str(target)).exit_code
        == 0
    )
    assert target.read_text().startswith("<!DOCTYPE html>") and "data:image/png;base64," in target.read_text()


def test_an_unknown_report_exits_two(tmp_path: Path) -> None:
    result = invoke(landed(tmp_path), "nope")
    assert result.exit_code == 2 and "unknown report" in result.stderr


def test_no_report_named_exits_two() -> None:
    assert invoke({}).exit_code == 2


def test_a_missing_lake_exits_two_naming_it_and_what_fills_it_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Away from a checkout whose var/demo holds a demo's lake: the line would point at it (a test of its own).
    monkeypatch.chdir(tmp_path)
    result = invoke({"ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "nowhere")}, "daily_activity")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"entitlements: lake not found at {tmp_path / 'nowhere'}: run `entitlements consume` "
        "(or `entitlements demo`) to fill it"
    ]
    assert not (tmp_path / "nowhere").exists()


def test_as_of_runs_the_report_over_the_lake_as_it_stood_then_and_writes_nothing(tmp_path: Path) -> None:
    env = landed(tmp_path)
    lake = tmp_path / "lake"
    before = sorted(p.relative_to(lake) for p in lake.rglob("*"))
    changes = CliRunner().invoke(
        cli, ["sql", "SELECT created_at FROM changes ORDER BY 1", "--format", "json"], env=env
    )
    instants = [row["created_at"] for row in json.loads(changes.stdout)]
    now = json.loads(invoke(env, "daily_activity", "--format", "json").stdout)["rows"]

    first = json.loads(invoke(env, "daily_activity", "--format", "json", "--as-of", instants[0]).stdout)
    whole = json.loads(invoke(env, "daily_activity", "--format", "json", "--as-of", instants[-1]).stdout)

    assert sum(row["signups"] for row in first["rows"]) == 1
    assert whole["rows"] == now
    assert sorted(p.relative_to(lake) for p in lake.rglob("*")) == before


def test_as_of_before_the_first_change_exits_two_with_one_line(tmp_path: Path) -> None:
    result = invoke(landed(tmp_path), "daily_activity", "--as-of", "2000-01-01T00:00:00Z")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("entitlements: no data in the lake at ") and "as of 2000-01-01T00:00:00Z" in line


def test_users_being_erased_are_left_out_of_every_report(tmp_path: Path) -> None:
    env = landed(tmp_path)
    everyone = json.loads(invoke(env, "accounts_per_user", "--format", "json").stdout)["rows"]
    AnalyticsLakeEraser(open_lake(str(tmp_path / "lake"))).mask(["alice"])

    result = invoke(env, "accounts_per_user", "--format", "json")

    assert result.exit_code == 0, result.output
    assert sum(row["users"] for row in json.loads(result.stdout)["rows"]) == (
        sum(row["users"] for row in everyone) - 1
    )


def test_a_report_away_from_a_terminal_says_on_stderr_that_it_is_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import analytics.mining  # noqa: PLC0415
    from entitlements import _progress  # noqa: PLC0415
    from entitlements.commands import mine  # noqa: PLC0415

    told, line = threading.Event(), _progress._line

    def telling(step: Any, elapsed: float) -> str:
        told.set()
        return line(step, elapsed)

    monkeypatch.setattr(_progress, "_line", telling)
    monkeypatch.setattr(mine, "LINE_SECONDS", 0.01)
    run = analytics.mining.run_report

    def long_report(*args: Any, **kwargs: Any) -> Any:
        told.wait(60)  # until a line is on its way: the report is "long" whatever the load
        return run(*args, **kwargs)

    # The command imports run_report from the face when it runs (kept off --help): patched there.
    monkeypatch.setattr(analytics.mining, "run_report", long_report)
    result = invoke(landed(tmp_path), "accounts_per_user")
    assert result.exit_code == 0, result.output
    assert any(text.startswith("mining accounts_per_user: ") for text in result.stderr.splitlines())
    assert "mining accounts_per_user:" not in result.stdout

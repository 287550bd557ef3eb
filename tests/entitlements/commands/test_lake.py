"""entitlements/commands/lake.py's `sql`: what it says while a long result is fetched and written (its
results and refusals: tests/analytics/test_lake_commands.py and tests/entitlements/commands/
test_bad_inputs.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.lake import open_lake
from entitlements import _progress
from entitlements.cli import app as cli
from entitlements.commands import lake as command
from tests.analytics.audits.story import clean_story


def test_a_long_sql_result_says_on_stderr_how_many_rows_are_written_away_from_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_story().land(open_lake(str(tmp_path / "lake")))
    told, line = threading.Event(), _progress._line

    def telling(step: _progress.ProgressStep, elapsed: float) -> str:
        if step.description.startswith("writing"):
            told.set()
        return line(step, elapsed)

    monkeypatch.setattr(_progress, "_line", telling)
    monkeypatch.setattr(command, "LINE_SECONDS", 0.01)
    write = command._write_result

    def long_write(*args: Any) -> None:
        told.wait(60)  # until a line is on its way: the write is "long" whatever the load
        write(*args)

    monkeypatch.setattr(command, "_write_result", long_write)
    env = {
        "ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake"),
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path),
    }
    target = tmp_path / "out.csv"
    result = CliRunner().invoke(cli, ["sql", "SELECT 1 AS n", "--output", str(target)], env=env)
    assert result.exit_code == 0, result.output
    assert any(text.startswith("writing 1 row: ") for text in result.stderr.splitlines())
    assert target.read_text().splitlines() == ["n", "1"]

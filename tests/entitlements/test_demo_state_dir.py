"""entitlements/_demo.py's state folder: `demo --state-dir` never deletes what it did not make."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from entitlements._demo import MARKER_NAME, _claim_state_dir, _record_state_dir
from entitlements.cli import app as cli
from schema.errors import DemoError


def earlier_demo(state: Path) -> Path:
    """A folder as a finished demo leaves it."""
    _claim_state_dir(state)
    (state / "lake").mkdir()
    (state / "lake" / "part.parquet").write_bytes(b"x")
    (state / "audit.md").write_text("report")
    _record_state_dir(state)
    return state


def test_a_missing_folder_is_made_and_marked_as_the_demos(tmp_path: Path) -> None:
    _claim_state_dir(tmp_path / "a" / "demo")
    assert json.loads((tmp_path / "a" / "demo" / MARKER_NAME).read_text())["made"] == []


def test_an_empty_folder_is_taken(tmp_path: Path) -> None:
    _claim_state_dir(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [MARKER_NAME]


def test_what_an_earlier_demo_made_is_replaced(tmp_path: Path) -> None:
    state = earlier_demo(tmp_path / "demo")
    _claim_state_dir(state)
    assert [p.name for p in state.iterdir()] == [MARKER_NAME]


def test_a_folder_holding_what_the_demo_did_not_make_is_refused_and_nothing_is_deleted(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "lake").mkdir()
    with pytest.raises(
        DemoError, match=re.escape("holds what the demo did not make (lake, notes.txt); nothing was deleted")
    ):
        _claim_state_dir(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake", "notes.txt"]


def test_a_file_added_to_an_earlier_demos_folder_refuses_it_whole(tmp_path: Path) -> None:
    state = earlier_demo(tmp_path / "demo")
    (state / "mine.csv").write_text("kept")
    with pytest.raises(DemoError, match=r"\(mine.csv\)"):
        _claim_state_dir(state)
    assert sorted(p.name for p in state.iterdir()) == [MARKER_NAME, "audit.md", "lake", "mine.csv"]


def test_a_symlink_the_demo_made_is_removed_never_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_text("kept")
    state = tmp_path / "demo"
    _claim_state_dir(state)
    (state / "link").symlink_to(elsewhere)
    _record_state_dir(state)
    _claim_state_dir(state)
    assert ((elsewhere / "precious").read_text(), (state / "link").exists()) == ("kept", False)


def test_a_damaged_marker_refuses_the_folder(tmp_path: Path) -> None:
    state = earlier_demo(tmp_path / "demo")
    (state / MARKER_NAME).write_text("{")
    with pytest.raises(DemoError, match="damaged"):
        _claim_state_dir(state)
    assert (state / "audit.md").exists()


def test_a_file_given_as_the_state_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "demo").write_text("mine")
    with pytest.raises(DemoError, match="is a file"):
        _claim_state_dir(tmp_path / "demo")


def test_the_command_refuses_a_foreign_folder_in_one_line_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(cli, ["demo", "--state-dir", str(tmp_path)])
    assert (result.exit_code, result.stdout) == (2, "")
    assert len(result.stderr.splitlines()) == 1
    assert str(tmp_path) in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"

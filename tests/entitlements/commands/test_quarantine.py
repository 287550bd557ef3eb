"""`entitlements quarantine list|export|redrive`."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from entitlements.commands.quarantine import app
from tests.entitlements.commands._stored import StateDir, stream_record, use_handlers
from tests.pipeline._consumer_fakes import Recorder, registry_of

runner = CliRunner()


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state")


def test_list_counts_the_quarantined_records_by_reason(state: StateDir) -> None:
    state.quarantined(b"x", "100", reason="not JSON")
    state.quarantined(b"y", "101", reason="not JSON")
    state.quarantined(b"z", "102", reason="nested too deep")
    result = runner.invoke(app, ["list"], env=state.env)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "quarantine: 3 records",
        "       2  not JSON",
        "       1  nested too deep",
    ]


def test_list_names_a_damaged_file_on_one_line_and_exits_1(state: StateDir) -> None:
    state.quarantined(b"x", "100")
    damaged = state.root / "quarantine" / "shardId-1" / "damaged.json"
    damaged.write_bytes(b"not json")
    result = runner.invoke(app, ["list"], env=state.env)
    assert (result.exit_code, result.stdout.splitlines()[0]) == (1, "quarantine: 1 record")
    assert result.stderr.splitlines() == [
        f"quarantine list: 1 damaged file skipped, left in place: {damaged}"
    ]


def test_list_never_prints_a_records_content(state: StateDir) -> None:
    state.quarantined(b"secret-user-id")
    assert "secret" not in runner.invoke(app, ["list"], env=state.env).stdout


def test_export_writes_every_record_to_a_new_owner_only_file(state: StateDir, tmp_path: Path) -> None:
    state.quarantined(b"raw")
    destination = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["export", str(destination)], env=state.env)
    assert result.exit_code == 0
    assert stat.S_IMODE(destination.stat().st_mode) == 0o600
    assert [json.loads(line)["raw_base64"] for line in destination.read_text().splitlines()] == ["cmF3"]


def test_export_to_an_existing_file_is_one_line_and_exit_1(state: StateDir, tmp_path: Path) -> None:
    destination = tmp_path / "out.jsonl"
    destination.write_text("keep")
    result = runner.invoke(app, ["export", str(destination)], env=state.env)
    assert (result.exit_code, len(result.stderr.splitlines())) == (1, 1)
    assert result.stderr.startswith("quarantine export: FileExistsError")
    assert destination.read_text() == "keep"


def test_redrive_hands_records_that_decode_now_to_every_handler_and_removes_them(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.quarantined(stream_record("e-1"))
    cleanup, lake = Recorder("cleanup"), Recorder("lake")
    use_handlers(monkeypatch, registry_of(cleanup, lake))
    result = runner.invoke(app, ["redrive"], env=state.env)
    assert (result.exit_code, cleanup.flushed, lake.flushed) == (0, ["e-1"], ["e-1"])
    assert state.quarantine.count() == 0


def test_redrive_exits_1_while_a_record_stays_quarantined(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.quarantined(b"still not json")
    use_handlers(monkeypatch, registry_of(Recorder("lake")))
    result = runner.invoke(app, ["redrive"], env=state.env)
    assert (result.exit_code, state.quarantine.count()) == (1, 1)
    assert "re-driven 0; 1 still quarantined" in result.stdout

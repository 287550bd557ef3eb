"""`entitlements quarantine list|export|redrive`."""

from __future__ import annotations

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

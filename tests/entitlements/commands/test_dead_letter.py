"""`entitlements dead-letter list|export|redrive`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from entitlements.commands.dead_letter import app
from tests.entitlements.commands._stored import StateDir, stream_record, use_handlers
from tests.pipeline._consumer_fakes import Recorder, registry_of

runner = CliRunner()


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state")


class Fixed(Recorder):
    """The handler after its fix: it accepts what it used to refuse."""

    def add(self, event: Any) -> None:
        self.pending.append(event.event_id)


def test_list_counts_the_dead_letters_by_handler_and_reason(state: StateDir) -> None:
    state.dead_lettered(b"x", "100")
    state.dead_lettered(b"y", "101")
    result = runner.invoke(app, ["list"], env=state.env)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "dead letters: 2 records",
        "       2  cleanup  the record names no account",
    ]


def test_export_writes_each_dead_letter_with_its_handler(state: StateDir, tmp_path: Path) -> None:
    state.dead_lettered(b"raw")
    destination = tmp_path / "out.jsonl"
    assert runner.invoke(app, ["export", str(destination)], env=state.env).exit_code == 0
    [line] = [json.loads(line) for line in destination.read_text().splitlines()]
    assert (line["handler"], line["raw_base64"]) == ("cleanup", "cmF3")


def test_redrive_after_the_fix_hands_the_record_to_its_handler_once_and_removes_it(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.dead_lettered(stream_record("poison-1"))
    lake = Recorder("lake")
    cleanup = Fixed("cleanup", sink=lake)
    use_handlers(monkeypatch, registry_of(cleanup, lake, feeds={"cleanup": ("lake",)}))
    result = runner.invoke(app, ["redrive"], env=state.env)
    assert (result.exit_code, cleanup.flushed, lake.flushed) == (0, ["poison-1"], ["out:poison-1"])
    assert state.dead_letters.count() == 0


def test_redrive_re_drives_around_a_damaged_file_names_it_on_one_line_and_exits_1(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.dead_lettered(stream_record("poison-1"))
    damaged = state.root / "dead-letter" / "cleanup" / "shardId-1" / "damaged.json"
    damaged.write_bytes(b'{"handler": "cleanup"}')
    lake = Recorder("lake")
    cleanup = Fixed("cleanup", sink=lake)
    use_handlers(monkeypatch, registry_of(cleanup, lake, feeds={"cleanup": ("lake",)}))
    result = runner.invoke(app, ["redrive"], env=state.env)
    assert (result.exit_code, cleanup.flushed, state.dead_letters.count()) == (1, ["poison-1"], 1)
    assert result.stderr.splitlines()[-1:] == [  # after the JSON log lines
        f"dead-letter redrive: 1 damaged file skipped, left in place: {damaged}"
    ]


def test_redrive_exits_1_while_a_letter_is_still_refused(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.dead_lettered(stream_record("poison-1"))
    use_handlers(monkeypatch, registry_of(Recorder("cleanup")))
    result = runner.invoke(app, ["redrive"], env=state.env)
    assert (result.exit_code, state.dead_letters.count()) == (1, 1)
    assert "1 still dead-lettered" in result.stdout
    assert "dead_letter  RecordRejected" in result.stdout


def test_redrive_of_one_handler_leaves_the_other_handlers_letters(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.dead_lettered(stream_record("poison-1"), handler="cleanup")
    state.dead_lettered(stream_record("poison-2"), handler="journal")
    use_handlers(monkeypatch, registry_of(Fixed("cleanup"), Fixed("journal")))
    assert runner.invoke(app, ["redrive", "--handler", "cleanup"], env=state.env).exit_code == 0
    assert [letter.handler for letter in state.dead_letters] == ["journal"]

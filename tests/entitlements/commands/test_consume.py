"""`entitlements replay-parked` and `entitlements consumer-status`."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from entitlements.commands.consume import app
from pipeline.parking import RawRecord
from schema.errors import TerminalError
from tests.entitlements.commands._stored import StateDir, stream_record, use_handlers
from tests.pipeline._consumer_fakes import STREAM, Recorder, registry_of

runner = CliRunner()


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state")


def park(state: StateDir, handler: str, *records: bytes) -> None:
    state.parked.park(
        handler=handler,
        stream_arn=STREAM,
        shard_id="shardId-1",
        records=[RawRecord(data, str(100 + i)) for i, data in enumerate(records)],
        reason="OSError",
    )


def test_replay_parked_with_a_poison_record_replays_the_good_ones_and_exits_0(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    park(state, "lake", stream_record("e-1", "100"), b"not json", stream_record("e-3", "102"))
    lake = Recorder("lake")
    use_handlers(monkeypatch, registry_of(lake))
    result = runner.invoke(app, ["replay-parked"], env=state.env)
    assert (result.exit_code, lake.flushed) == (0, ["e-1", "e-3"])
    assert (state.parked.count(), state.quarantine.count(), state.dead_letters.count()) == (0, 1, 0)


def test_replay_parked_exits_1_while_a_batch_stays_parked(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    park(state, "lake", stream_record("e-1"))
    use_handlers(monkeypatch, registry_of(Recorder("lake", failures=[TerminalError("disk full")])))
    result = runner.invoke(app, ["replay-parked"], env=state.env)
    assert (result.exit_code, state.parked.count()) == (1, 1)
    assert "1 still parked" in result.stdout


def test_replay_parked_with_a_registry_it_cannot_order_is_one_line_and_exit_1(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    park(state, "lake", stream_record("e-1"))
    use_handlers(monkeypatch, registry_of(Recorder("cleanup"), feeds={"cleanup": ("lake",)}))
    result = runner.invoke(app, ["replay-parked"], env=state.env)
    assert (result.exit_code, len(result.stderr.splitlines())) == (1, 1)
    assert state.parked.count() == 1


def test_consumer_status_counts_the_stores(state: StateDir) -> None:
    (state.root / "stats").mkdir(parents=True)
    (state.root / "stats" / "shardId-1.json").write_text(
        '{"shard_id": "shardId-1", "records": 3, "quarantined": 1, "parked_batches": 0, "checkpoints": 1,'
        ' "iterator_age_ms": null, "updated_at": "2026-01-01T00:00:00+00:00", "events_by_type": {}}'
    )
    state.dead_lettered(b"x")
    result = runner.invoke(app, ["consumer-status"], env=state.env)
    assert result.exit_code == 0
    assert "dead letters: 1 records" in result.stdout

"""`entitlements consumer-status`: whether the consumer runs, every figure with its age, the stores and
the cleanup retry queue, as lines or as one JSON object."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config import load_settings
from entitlements.commands.consume import app
from entitlements.compose import setup_retry_queues
from tests.entitlements.commands._stored import StateDir
from tests.support.dynamodb import REGION
from tests.telemetry._holder import holding

runner = CliRunner()
WRITTEN = datetime.now(UTC) - timedelta(minutes=5)


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state")


@pytest.fixture
def queue_name(moto_endpoint: str, state: StateDir) -> str:
    name = f"retry-{uuid.uuid4().hex[:8]}"
    settings = load_settings(
        aws={"endpoint_url": moto_endpoint, "region": REGION},
        cleanup={"retry_queue_name": name},
        **env_overrides(state),
    )
    setup_retry_queues(settings)
    return name


def env_overrides(state: StateDir) -> dict[str, dict[str, object]]:
    return {"consumer": {"state_dir": state.root}}


def env(state: StateDir, endpoint: str) -> dict[str, str]:
    return {**state.env, "ENTITLEMENTS_AWS__ENDPOINT_URL": endpoint, "ENTITLEMENTS_AWS__REGION": REGION}


def write_stats(state: StateDir, records: int = 3) -> None:
    (state.root / "stats").mkdir(parents=True, exist_ok=True)
    (state.root / "stats" / "shardId-1.json").write_text(
        json.dumps(
            {
                "shard_id": "shardId-1",
                "records": records,
                "quarantined": 1,
                "dead_lettered": 0,
                "parked_batches": 0,
                "checkpoints": 1,
                "iterator_age_ms": 2500.0,
                "updated_at": WRITTEN.isoformat(),
                "events_by_type": {"entitlement.created": 2},
            }
        )
    )


def status(state: StateDir, endpoint: str, queue: str, *, as_json: bool = True) -> tuple[int, str]:
    arguments = ["consumer-status", "--retry-queue-name", queue, *(["--json"] if as_json else [])]
    result = runner.invoke(app, arguments, env=env(state, endpoint))
    return result.exit_code, result.stdout


@pytest.fixture
def holder(state: StateDir) -> Iterator[subprocess.Popen[str]]:
    with holding(state.root) as process:
        yield process


def test_every_shard_figure_carries_the_time_it_was_written_and_its_age(
    state: StateDir, moto_endpoint: str, queue_name: str
) -> None:
    write_stats(state)
    code, out = status(state, moto_endpoint, queue_name)
    figures = json.loads(out)["shards"][0]["figures"]
    assert code == 0
    assert {name: figure["value"] for name, figure in figures.items()} == {
        "records": 3,
        "quarantined": 1,
        "dead_lettered": 0,
        "parked_batches": 0,
        "checkpoints": 1,
        "iterator_age_seconds": 2.5,
        "events_by_type": {"entitlement.created": 2},
    }
    assert {figure["as_of"] for figure in figures.values()} == {WRITTEN.isoformat()}
    assert all(figure["age_seconds"] >= 300 for figure in figures.values())


def test_the_stores_and_the_retry_queue_are_counted_now(
    state: StateDir, moto_endpoint: str, queue_name: str
) -> None:
    write_stats(state)
    state.dead_lettered(b"x")
    _code, out = status(state, moto_endpoint, queue_name)
    report = json.loads(out)
    assert {name: figure["value"] for name, figure in report["stores"].items()} == {
        "quarantine": 0,
        "dead_letters": 1,
        "parked_batches": 0,
    }
    queue = report["retry_queue"]
    assert (queue["name"], queue["depth"]["value"], queue["depth"]["as_of"]) == (
        queue_name,
        0,
        report["as_of"],
    )


def test_a_stopped_consumer_is_reported_not_running(
    state: StateDir, moto_endpoint: str, queue_name: str
) -> None:
    write_stats(state)
    _code, out = status(state, moto_endpoint, queue_name)
    assert json.loads(out)["consumer"]["running"] is False


def test_a_running_consumer_is_reported_running_with_its_pid(
    state: StateDir, moto_endpoint: str, queue_name: str, holder: subprocess.Popen[str]
) -> None:
    write_stats(state)
    _code, out = status(state, moto_endpoint, queue_name)
    consumer = json.loads(out)["consumer"]
    assert (consumer["running"], consumer["pid"]) == (True, holder.pid)


def test_the_lines_say_whether_the_consumer_runs_and_how_old_each_shards_figures_are(
    state: StateDir, moto_endpoint: str, queue_name: str
) -> None:
    write_stats(state)
    _code, out = status(state, moto_endpoint, queue_name, as_json=False)
    lines = out.splitlines()
    assert lines[0] == "consumer: not running (no `entitlements consume` on this state folder)"
    assert lines[1].startswith("shardId-1: 3 records, 1 quarantined, 0 dead-lettered")
    assert f"(as of {WRITTEN.isoformat()}, " in lines[1]
    assert lines[-1] == f"retry queue {queue_name}: 0 messages (0 visible, 0 in flight, 0 delayed)"


def test_a_missing_retry_queue_names_the_setup_command(state: StateDir, moto_endpoint: str) -> None:
    write_stats(state)
    _code, out = status(state, moto_endpoint, "no-such-queue", as_json=False)
    assert "entitlements cleanup setup" in out.splitlines()[-1]


def test_no_shard_reported_still_reports_the_rest_and_exits_1(
    state: StateDir, moto_endpoint: str, queue_name: str
) -> None:
    code, out = status(state, moto_endpoint, queue_name)
    report = json.loads(out)
    assert (code, report["shards"], report["retry_queue"]["depth"]["value"]) == (1, [], 0)


def test_a_consumer_that_ended_without_stopping_is_reported_so(
    state: StateDir, moto_endpoint: str, queue_name: str
) -> None:
    write_stats(state)
    with holding(state.root):
        pass  # the holder ends without releasing: as a killed consumer
    _code, out = status(state, moto_endpoint, queue_name, as_json=False)
    assert "ended without stopping cleanly" in out.splitlines()[0]

"""entitlements/commands/lake.py: `snapshot`, `sql` and `compact` on the settings' lake."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from analytics.erasure import AnalyticsLakeEraser
from analytics.lake import Lake, LakeHandler, open_lake
from entitlements.commands.lake import app
from tests.analytics.lakesim import TableSim, replay


@pytest.fixture
def landed(tmp_path: Path, history: TableSim) -> tuple[Lake, dict[str, str]]:
    lake = open_lake(str(tmp_path / "lake"))
    handler = LakeHandler(lake)
    for event in history.events:
        handler.add(event)
    for outcome in history.outcomes:
        handler.add_outcome(outcome)
    handler.flush()
    return lake, {"ENTITLEMENTS_LAKE__ROOT": lake.uri}


def _run(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_snapshot_then_an_incremental_one(landed: tuple[Lake, dict[str, str]]) -> None:
    _, env = landed
    assert "snapshot 1 (full rebuild)" in _run(env, "snapshot")
    out = _run(env, "snapshot")
    assert "(incremental)" in out and "change files read: 0" in out


def test_snapshot_as_of_writes_the_state_at_that_instant(
    landed: tuple[Lake, dict[str, str]], history: TableSim, tmp_path: Path
) -> None:
    _, env = landed
    instant = history.events[120].created_at
    target = tmp_path / "as_of.parquet"
    out = _run(env, "snapshot", "--as-of", instant.isoformat(), "--output", str(target))
    assert "stream time" in out
    assert pq.read_table(target).num_rows == len(replay(history.events, as_of=instant))


def test_sql_prints_a_table_csv_json_or_parquet(
    landed: tuple[Lake, dict[str, str]], history: TableSim, tmp_path: Path
) -> None:
    _, env = landed
    query = "SELECT user_id, count(*) AS n, max(created_at) AS last FROM changes GROUP BY 1 ORDER BY 1"
    users = len({e.user_id for e in history.events})
    assert f"{users} rows" in _run(env, "sql", query)
    rows = list(csv.DictReader(io.StringIO(_run(env, "sql", query, "--format", "csv"))))
    assert len(rows) == users and sum(int(r["n"]) for r in rows) == len(history.events)
    data = json.loads(_run(env, "sql", query, "--format", "json"))
    assert len(data) == users and data[0]["last"].endswith("+00:00")
    target = tmp_path / "out.parquet"
    _run(env, "sql", query, "--format", "parquet", "--output", str(target))
    assert pq.read_table(target).num_rows == users


def test_a_bad_query_exits_2(landed: tuple[Lake, dict[str, str]]) -> None:
    _, env = landed
    result = CliRunner().invoke(app, ["sql", "SELECT * FROM no_such_view"], env=env)
    assert result.exit_code == 2


def test_compact_reports_what_it_merged(landed: tuple[Lake, dict[str, str]]) -> None:
    _, env = landed
    out = _run(env, "compact")
    assert out.startswith("changes: ")
    assert "outcomes: " in out


def test_compact_follow_runs_again_after_each_interval(landed: tuple[Lake, dict[str, str]]) -> None:
    _, env = landed
    out = _run(env, "compact", "--follow", "--interval-seconds", "0", "--rounds", "2")
    assert out.count("changes: ") == 2


def test_sql_writes_parquet_to_a_redirected_stdout(
    landed: tuple[Lake, dict[str, str]], history: TableSim
) -> None:
    _, env = landed
    result = CliRunner().invoke(app, ["sql", "SELECT * FROM changes", "--format", "parquet"], env=env)
    assert result.exit_code == 0
    assert pq.read_table(pa.BufferReader(result.stdout_bytes)).num_rows == len(history.events)


def test_sql_hides_the_accounts_an_erasure_is_masking(
    landed: tuple[Lake, dict[str, str]], tmp_path: Path
) -> None:
    lake, env = landed
    query = "SELECT DISTINCT user_id FROM changes WHERE user_id IS NOT NULL ORDER BY 1"
    users = [row["user_id"] for row in json.loads(_run(env, "sql", query, "--format", "json"))]
    masked = users[0]
    AnalyticsLakeEraser(lake).mask([masked])
    env = {**env, "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state")}
    after = [row["user_id"] for row in json.loads(_run(env, "sql", query, "--format", "json"))]
    assert after == users[1:]

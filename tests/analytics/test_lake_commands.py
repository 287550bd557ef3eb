"""entitlements/commands/lake.py: `snapshot`, `sql` and `compact` on the settings' lake."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from analytics.lake import Lake, LakeHandler, open_lake
from analytics.lake.eraser import AnalyticsLakeEraser
from entitlements.cli import app as cli
from entitlements.commands.lake import app
from tests.analytics.lake.test_views import duckdb_cli_lines
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


def test_snapshot_as_of_writes_the_state_at_that_instant_to_the_output_only(
    landed: tuple[Lake, dict[str, str]], history: TableSim, tmp_path: Path
) -> None:
    lake, env = landed
    before = _tree(Path(lake.base))
    instant = history.events[120].created_at
    target = tmp_path / "as_of.parquet"
    out = _run(env, "snapshot", "--as-of", instant.isoformat(), "--output", str(target))
    assert "stream time" in out
    assert pq.read_table(target).num_rows == len(replay(history.events, as_of=instant))
    assert _tree(Path(lake.base)) == before


def test_snapshot_as_of_store_keeps_the_state_in_the_lake(
    landed: tuple[Lake, dict[str, str]], history: TableSim
) -> None:
    lake, env = landed
    instant = history.events[120].created_at
    out = _run(env, "snapshot", "--as-of", instant.isoformat(), "--store")
    assert f"written: {lake.uri_for('snapshots/as_of')}" in out


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


def _refused(env: dict[str, str], *args: str) -> str:
    """`entitlements ARGS` through the CLI's root: exit 2 and one line on stderr, returned."""
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("entitlements: ") and "Traceback" not in result.output
    return line


def _tree(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*"))


def test_a_bad_query_exits_2_with_duckdbs_reason(landed: tuple[Lake, dict[str, str]]) -> None:
    _, env = landed
    line = _refused(env, "sql", "SELECT no_such_column FROM changes")
    assert "query failed: Binder Error" in line and "no_such_column" in line


def test_a_name_that_is_not_a_view_is_refused_by_name(landed: tuple[Lake, dict[str, str]]) -> None:
    _, env = landed
    line = _refused(env, "sql", "SELECT * FROM no_such_view")
    assert "refused: the query names no_such_view, which is not a lake view" in line


@pytest.mark.parametrize(
    "query",
    [
        "CREATE TABLE t AS SELECT 1",
        "COPY (SELECT * FROM changes) TO '{out}'",
        "INSERT INTO erased_users VALUES ('x')",
        "DELETE FROM erased_users",
        "ATTACH '{out}' AS other",
        "SET threads = 1",
        "INSTALL httpfs",
        "LOAD httpfs",
        "PRAGMA database_list",
        "SELECT 1; COPY (SELECT 1) TO '{out}'",
        "EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}'",
    ],
)
def test_sql_refuses_anything_but_one_read_and_writes_nothing(
    landed: tuple[Lake, dict[str, str]], tmp_path: Path, query: str
) -> None:
    lake, env = landed
    out = tmp_path / "written.csv"
    before = _tree(Path(lake.base))

    line = _refused(env, "sql", query.format(out=out))

    assert "refused" in line and "--output" in line
    assert not out.exists() and _tree(Path(lake.base)) == before


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_parquet('{lake}/changes/*/*.parquet')",
        "SELECT * FROM read_csv('{secret}')",
        "SELECT count(*) FROM changes WHERE user_id IN (SELECT * FROM read_text('{secret}'))",
        "FROM glob('{lake}/*')",
        "FROM delta_scan('{lake}/changes')",
        "FROM parquet_metadata('{lake}/changes')",
        "FROM '{secret}'",
        'SELECT * FROM "{secret}"',
        "DESCRIBE '{secret}'",
        "SELECT * FROM erased_users",
        "SELECT * FROM information_schema.tables",
        "WITH x AS (FROM read_csv('{secret}')) SELECT * FROM x",
        "EXPLAIN SELECT * FROM read_csv('{secret}')",
    ],
)
def test_sql_reads_only_the_views_and_refuses_table_functions_and_paths(
    landed: tuple[Lake, dict[str, str]], tmp_path: Path, query: str
) -> None:
    lake, env = landed
    secret = tmp_path / "secret.csv"
    secret.write_text("token\nnot-for-the-query\n")

    line = _refused(env, "sql", query.format(lake=lake.base, secret=secret))

    assert "refused" in line and "lake's views" in line
    assert str(secret) not in line and "not-for-the-query" not in line


def test_sql_accepts_ctes_describe_and_show_over_the_views(landed: tuple[Lake, dict[str, str]]) -> None:
    _, env = landed
    query = "WITH c AS (SELECT user_id FROM changes) SELECT count(DISTINCT user_id) > 0 AS seen FROM c"
    assert json.loads(_run(env, "sql", query, "--format", "json")) == [{"seen": True}]
    assert "user_id" in _run(env, "sql", "DESCRIBE changes", "--format", "csv")
    assert "entitlements" in _run(env, "sql", "SHOW TABLES", "--format", "csv")


def test_sql_on_a_missing_lake_names_it_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From a folder of its own: beside a `make demo`'s var/demo the line also points at the demo's lake.
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "var" / "lake"
    line = _refused({"ENTITLEMENTS_LAKE__ROOT": str(root)}, "sql", "SELECT count(*) FROM changes")
    assert line == (
        f"entitlements: lake not found at {root}: "
        "run `entitlements consume` (or `entitlements demo`) to fill it"
    )
    assert not (tmp_path / "var").exists()


def test_snapshot_of_a_missing_lake_names_it_and_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    assert "lake not found at" in _refused({"ENTITLEMENTS_LAKE__ROOT": str(root)}, "snapshot")
    assert not root.exists()


def test_sql_on_a_lake_folder_with_no_tables_names_it(tmp_path: Path) -> None:
    open_lake(str(tmp_path / "lake"))
    assert "lake not found at" in _refused(
        {"ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake")}, "sql", "FROM changes"
    )
    assert list((tmp_path / "lake").iterdir()) == []


@pytest.mark.parametrize(("suffix", "read"), [(".csv", "csv"), (".json", "json"), (".parquet", "parquet")])
def test_sql_output_takes_its_format_from_the_suffix(
    landed: tuple[Lake, dict[str, str]], history: TableSim, tmp_path: Path, suffix: str, read: str
) -> None:
    _, env = landed
    target = tmp_path / f"changes{suffix}"
    result = CliRunner().invoke(cli, ["sql", "SELECT * FROM changes", "--output", str(target)], env=env)
    assert result.exit_code == 0, result.output
    if read == "csv":
        rows = len(list(csv.DictReader(io.StringIO(target.read_text()))))
    elif read == "json":
        rows = len(json.loads(target.read_text()))
    else:
        rows = pq.read_table(target).num_rows
    assert rows == len(history.events) and result.stdout == ""


def test_sql_refuses_an_output_inside_the_lake(landed: tuple[Lake, dict[str, str]]) -> None:
    lake, env = landed
    inside = Path(lake.base) / "export.csv"
    assert "inside the lake" in _refused(env, "sql", "FROM changes", "--output", str(inside))
    assert not inside.exists()


def test_sql_as_of_reads_the_items_as_they_stood_then_and_writes_nothing(
    landed: tuple[Lake, dict[str, str]], history: TableSim
) -> None:
    lake, env = landed
    _run(env, "snapshot")
    before = _tree(Path(lake.base))
    instant = history.events[120].created_at
    query = "SELECT count(*) AS n FROM current_items"

    then = json.loads(_run(env, "sql", query, "--format", "json", "--as-of", instant.isoformat()))

    assert then == [{"n": len(replay(history.events, as_of=instant))}]
    assert _tree(Path(lake.base)) == before


def test_sql_as_of_hides_outcomes_of_later_changes(
    landed: tuple[Lake, dict[str, str]], history: TableSim
) -> None:
    _, env = landed
    first = min(e.created_at for e in history.events)
    query = "SELECT count(*) AS n FROM outcomes WHERE source_event_id NOT IN (SELECT event_id FROM changes)"
    assert json.loads(_run(env, "sql", query, "--format", "json", "--as-of", first.isoformat())) == [{"n": 0}]


def test_sql_as_of_before_the_first_change_exits_2(landed: tuple[Lake, dict[str, str]]) -> None:
    _, env = landed
    line = _refused(env, "sql", "FROM changes", "--as-of", "1999-12-31T00:00:00Z")
    assert "no data in the lake at" in line and "as of 1999-12-31T00:00:00Z (its first change is at" in line


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


def test_lake_views_prints_a_script_the_duckdb_cli_runs_after_later_commits(
    landed: tuple[Lake, dict[str, str]], history: TableSim, tmp_path: Path
) -> None:
    lake, env = landed
    result = CliRunner().invoke(cli, ["lake", "views", "--include", "mining"], env=env)
    assert result.exit_code == 0, result.output
    saved = tmp_path / "lake.sql"
    saved.write_text(result.stdout)
    later = TableSim(shards=("shardId-00000009-zzzz",), seed=3)
    later.random_history(users=3, operations=20)
    handler = LakeHandler(lake)
    for event in later.events:
        handler.add(event)
    handler.flush()
    counted = duckdb_cli_lines(f".read {saved}", "SELECT count(*) FROM changes", cwd=tmp_path)
    assert counted == [str(len(history.events) + len(later.events))]


def test_lake_files_names_only_files_of_the_lake(landed: tuple[Lake, dict[str, str]]) -> None:
    lake, env = landed
    result = CliRunner().invoke(cli, ["lake", "files"], env=env)
    assert result.exit_code == 0, result.output
    quoted = re.findall(r"'([^']*)'", result.stdout)
    out = result.stdout
    assert quoted and all(q.startswith(lake.uri + "/") for q in quoted)
    assert "changes_files" in out and "audit_failures_files = []" in out


def test_lake_views_duckdb_writes_a_database_and_refuses_to_overwrite_it(
    landed: tuple[Lake, dict[str, str]], history: TableSim, tmp_path: Path
) -> None:
    _, env = landed
    target = tmp_path / "lake.duckdb"
    result = CliRunner().invoke(cli, ["lake", "views", "--duckdb", str(target)], env=env)
    assert result.exit_code == 0, result.output
    counted = duckdb_cli_lines("SELECT count(*) FROM changes", cwd=tmp_path, database=target)
    assert counted == [str(len(history.events))]
    again = CliRunner().invoke(cli, ["lake", "views", "--duckdb", str(target)], env=env)
    assert again.exit_code == 2 and "--force" in again.output
    forced = CliRunner().invoke(cli, ["lake", "views", "--duckdb", str(target), "--force"], env=env)
    assert forced.exit_code == 0, forced.output

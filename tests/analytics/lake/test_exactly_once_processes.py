"""Six seeded kill -9s of a landing process replaying one stream (two of them or more between a
commit's data files and its log entry), on local disk and on moto's S3: then `changes` and
`outcomes`, read by deltalake's reader, Polars and DuckDB's `delta_scan` (not our views; on S3 through
DuckDB's httpfs extension from its PyPI wheel, loaded offline), hold one row per identity and every
identity of the stream; the views' dedupe removes nothing."""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from analytics.lake import Lake, open_lake
from analytics.lake._duck import literal, load_delta_extension
from analytics.lake.views import duplicates_removed
from tests.analytics.lake.conftest import new_s3_root
from tests.analytics.lake.landing_process import stream

REPO = Path(__file__).resolve().parents[3]
SEED = 7
KILLS = 6


def _runs(seed: int) -> list[list[str]]:
    """Six killed runs (kinds drawn from the seed, at least two inside a commit) and a last one."""
    rng = random.Random(seed)
    kinds = ["--kill-in-commit", "--kill-in-commit"] + [
        rng.choice(["--kill-in-commit", "--kill-after-commit", "--kill-after-events"]) for _ in range(4)
    ]
    rng.shuffle(kinds)
    runs = []
    for kind in kinds:
        at = rng.randint(1, 3) if kind != "--kill-after-events" else rng.randint(5, 40)
        runs.append(["--flush-rows", str(rng.randint(4, 30)), kind, str(at)])
    runs.append(["--flush-rows", str(rng.randint(4, 30))])
    return runs


def _land(root: str, state: Path, endpoint: str = "") -> list[int]:
    codes = []
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "PYTHONPATH": str(REPO)}
    for run in _runs(SEED):
        args = [sys.executable, "-m", "tests.analytics.lake.landing_process", "--root", root]
        args += ["--state", str(state), "--seed", "1", *run]
        if endpoint:
            args += ["--s3-endpoint", endpoint]
        done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, timeout=300, check=False)
        assert done.stdout == b""
        codes.append(done.returncode)
    return codes


def _expected() -> tuple[set[tuple[str, str, str]], set[str]]:
    changes: set[tuple[str, str, str]] = set()
    outcomes: set[str] = set()
    for item in stream(1):
        position = getattr(item, "position", None)
        if position is not None:
            changes.add((position.stream_arn, position.shard_id, position.sequence_number))
        else:
            outcomes.add(str(item.outcome_id))  # type: ignore[union-attr]
    return changes, outcomes


def _identities(table: pa.Table, name: str) -> list[tuple[object, ...]]:
    columns = ["stream_arn", "shard_id", "sequence_number"] if name == "changes" else ["outcome_id"]
    return list(zip(*(table[c].to_pylist() for c in columns), strict=True))


def _duckdb(lake: Lake) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the delta extension and, for an S3 lake, the httpfs extension from the
    `duckdb-extension-httpfs` wheel (DuckDB's extension site is never reached) and a secret for the
    lake's endpoint and credentials."""
    con = duckdb.connect()
    if not lake.is_local:
        spec = importlib.util.find_spec("duckdb_extension_httpfs")
        assert spec is not None and spec.origin is not None
        folder = Path(spec.origin).parent / "extensions" / f"v{duckdb.__version__}"
        con.execute(f"LOAD {literal(str(folder / 'httpfs.duckdb_extension'))}")
        options = lake.storage_options
        endpoint = urlsplit(options["AWS_ENDPOINT_URL"])
        con.execute(
            "CREATE SECRET (TYPE s3, URL_STYLE 'path', "
            f"KEY_ID {literal(options['AWS_ACCESS_KEY_ID'])}, "
            f"SECRET {literal(options['AWS_SECRET_ACCESS_KEY'])}, "
            f"REGION {literal(options['AWS_REGION'])}, ENDPOINT {literal(endpoint.netloc)}, "
            f"USE_SSL {'true' if endpoint.scheme == 'https' else 'false'})"
        )
    load_delta_extension(con)
    return con


def _read_all(lake: Lake, name: str) -> dict[str, list[tuple[object, ...]]]:
    uri = lake.table_uri(name)
    options = dict(lake.storage_options) or None
    by_reader = {"deltalake": _identities(DeltaTable(uri, storage_options=options).to_pyarrow_table(), name)}
    by_reader["polars"] = _identities(pl.read_delta(uri, storage_options=options).to_arrow(), name)
    con = _duckdb(lake)
    try:
        by_reader["duckdb"] = _identities(con.sql(f"FROM delta_scan({literal(uri)})").to_arrow_table(), name)
    finally:
        con.close()
    return by_reader


def _check(lake: Lake) -> None:
    expected_changes, expected_outcomes = _expected()
    for name, expected in (("changes", expected_changes), ("outcomes", expected_outcomes)):
        by_reader = _read_all(lake, name)
        assert set(by_reader) == {"deltalake", "polars", "duckdb"}
        for reader, rows in by_reader.items():
            identities = {row if name == "changes" else str(row[0]) for row in rows}
            assert len(rows) == len(identities), (name, reader)
            assert identities == expected, (name, reader)
    assert duplicates_removed(lake) == {"changes": 0, "outcomes": 0}


def test_kill_nines_of_a_landing_process_leave_each_row_once_on_local_disk(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    codes = _land(str(root), tmp_path)
    assert codes == [-9] * KILLS + [0]
    _check(open_lake(str(root)))


def test_kill_nines_of_a_landing_process_leave_each_row_once_on_moto_s3(
    tmp_path: Path, moto_s3_endpoint: str
) -> None:
    root = new_s3_root(moto_s3_endpoint)
    codes = _land(root, tmp_path, moto_s3_endpoint)
    assert codes == [-9] * KILLS + [0]
    lake = open_lake(
        root, endpoint_url=moto_s3_endpoint, region="eu-west-1", access_key="testing", secret_key="testing"
    )
    _check(lake)


def test_the_seed_puts_at_least_two_kills_inside_a_commit() -> None:
    runs = _runs(SEED)
    assert sum("--kill-in-commit" in run for run in runs) >= 2
    assert len(runs) == KILLS + 1


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

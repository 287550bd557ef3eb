"""Many landing processes append to one lake at once (a KCL worker per shard, on several hosts): every
commit lands, no row is lost and none is doubled, on a local lake and on moto's S3 (conditional PUTs);
first writers creating the lake's tables at one instant make one table each; writers land through
erasures whose clean-up deletes the log they read."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from analytics.lake import CHANGES, Lake, LakeHandler, open_lake
from analytics.lake._delta import open_table
from analytics.lake._files import TABLES
from analytics.lake._schema import OUTCOMES
from analytics.lake.purge import purge_users
from analytics.lake.views import connect
from tests.analytics.lake.concurrent_writer import RACE_TABLES, SHARDS, history, lake_at
from tests.analytics.lake.conftest import new_s3_root
from tests.analytics.lake.delta_files import table_ids
from tests.analytics.lakesim import TableSim

REPO = Path(__file__).resolve().parents[3]
WRITERS = len(SHARDS)


def _start_writers(root: str, endpoint: str | None = None) -> list[subprocess.Popen[bytes]]:
    extra = [endpoint] if endpoint else []
    return [
        subprocess.Popen(
            [sys.executable, "-m", "tests.analytics.lake.concurrent_writer", root, str(index), *extra],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
        )
        for index in range(WRITERS)
    ]


def _run_writers(root: str, endpoint: str | None = None) -> list[int]:
    return [process.wait(timeout=600) for process in _start_writers(root, endpoint)]


def _land_erased_users(lake: Lake) -> list[str]:
    """Users the writers' history does not hold, landed before them: the erasures' work."""
    erased = [f"erased-{n}" for n in range(3)]
    sim = TableSim(shards=("shardId-00000009-zzzz",), seed=3)
    for user in erased:
        sim.signup(user, f"{user}-acct")
    handler = LakeHandler(lake)
    for event in sim.events:
        handler.add(event)
    handler.flush()
    return erased


def _erase_while_writing(lake: Lake, root: str, endpoint: str | None = None) -> list[int]:
    """Writer processes landing while this process purges: the erased users, then ids that hold
    nothing (each purge's clean-up deletes the log the writers read) until every writer has exited."""
    erased = _land_erased_users(lake)
    writers = _start_writers(root, endpoint)
    ids = iter([*erased, *(f"nobody-{n}" for n in range(10_000))])
    overlapped = 0
    while any(process.poll() is None for process in writers):
        purge_users(lake, [next(ids)])
        overlapped += any(process.poll() is None for process in writers)
    purge_users(lake, erased)  # whichever the writers outran
    assert overlapped > 0  # a purge's clean-up ran while writers were landing
    return [process.wait(timeout=600) for process in writers]


def _rows_check(lake: Lake) -> None:
    """Every row the writers landed, once (a purge's clean-up leaves no log of their commits to count)."""
    sim = history()
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM raw_changes").fetchall() == [(len(sim.events),)]
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(sim.events),)]
    assert con.execute("SELECT count(*) FROM outcomes").fetchall() == [(len(sim.outcomes),)]


def _run_creators(root: str, go: Path, endpoint: str | None = None) -> list[int]:
    """Writer processes that each create the lake's tables the moment `go` appears."""
    extra = [endpoint] if endpoint else []
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.analytics.lake.concurrent_writer", "create", root, str(go), *extra],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
        )
        for _ in range(WRITERS)
    ]
    time.sleep(3)  # every process imported and waiting (if one is not, the race is only smaller)
    go.touch()
    return [process.wait(timeout=600) for process in processes]


def _one_table_each(lake: Lake) -> None:
    for name in (*TABLES, *RACE_TABLES):
        assert len(table_ids(lake, name)) == 1, name
        table = open_table(lake, name)
        assert table is not None and table.version() == 0, name


def _check(lake: Lake) -> None:
    sim = history()
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM raw_changes").fetchall() == [(len(sim.events),)]
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(sim.events),)]
    assert con.execute("SELECT count(*) FROM outcomes").fetchall() == [(len(sim.outcomes),)]
    for name in (CHANGES, OUTCOMES):
        table = open_table(lake, name)
        assert table is not None
        writes = [h for h in table.history() if h["operation"] == "WRITE"]
        # Every flush of every writer is a commit of its own: none was lost or merged into another.
        assert len(writes) == len({h["version"] for h in writes}) >= WRITERS


def test_writer_processes_land_through_erasures_cleaning_a_local_lakes_log(tmp_path: Path) -> None:
    root = str(tmp_path / "lake")
    assert _erase_while_writing(open_lake(root), root) == [0] * WRITERS
    _rows_check(open_lake(root))


def test_writer_processes_append_to_a_local_lake_at_once(tmp_path: Path) -> None:
    root = str(tmp_path / "lake")
    open_lake(root)
    assert _run_writers(root) == [0] * WRITERS
    _check(open_lake(root))


def test_first_writer_processes_creating_a_local_lake_at_once_make_one_table_each(tmp_path: Path) -> None:
    root = str(tmp_path / "lake")
    assert _run_creators(root, tmp_path / "go") == [0] * WRITERS
    _one_table_each(open_lake(root))


@pytest.fixture
def moto_s3(moto_s3_endpoint: str) -> str:
    """The run's moto process (tests/analytics/lake/conftest.py); each lake is in a bucket of its own."""
    return moto_s3_endpoint


def test_writer_processes_append_to_an_s3_lake_at_once(moto_s3: str) -> None:
    root = new_s3_root(moto_s3)
    assert _run_writers(root, moto_s3) == [0] * WRITERS
    _check(lake_at(root, moto_s3))


# Once lost one writer's flush (363 of 370 rows, every writer exiting 0): moto checked S3's If-None-Match
# and stored the object in two steps, so two writers could both "win" one log version. MotoServer now
# serialises conditional writes (tests/devstack/test_moto_server_conditional_writes.py shows the race).
def test_writer_processes_land_through_erasures_cleaning_an_s3_lakes_log(moto_s3: str) -> None:
    root = new_s3_root(moto_s3)
    assert _erase_while_writing(lake_at(root, moto_s3), root, moto_s3) == [0] * WRITERS
    _rows_check(lake_at(root, moto_s3))


def test_first_writer_processes_creating_an_s3_lake_at_once_make_one_table_each(
    moto_s3: str, tmp_path: Path
) -> None:
    root = new_s3_root(moto_s3)
    assert _run_creators(root, tmp_path / "go", moto_s3) == [0] * WRITERS
    _one_table_each(lake_at(root, moto_s3))

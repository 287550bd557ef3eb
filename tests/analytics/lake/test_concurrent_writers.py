"""Many landing processes append to one lake at once (a KCL worker per shard, on several hosts): every
commit lands, no row is lost and none is doubled, on a local lake and on moto's S3 (conditional PUTs)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from analytics.lake import CHANGES, OUTCOMES, Lake, open_lake
from analytics.lake._delta import open_table
from analytics.views import connect
from devstack.moto_process import moto_process
from tests.analytics.lake.concurrent_writer import SHARDS, history

REPO = Path(__file__).resolve().parents[3]
WRITERS = len(SHARDS)


def _run_writers(root: str, endpoint: str | None = None) -> list[int]:
    extra = [endpoint] if endpoint else []
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.analytics.lake.concurrent_writer", root, str(index), *extra],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
        )
        for index in range(WRITERS)
    ]
    return [process.wait(timeout=600) for process in processes]


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


def test_writer_processes_append_to_a_local_lake_at_once(tmp_path: Path) -> None:
    root = str(tmp_path / "lake")
    open_lake(root)
    assert _run_writers(root) == [0] * WRITERS
    _check(open_lake(root))


@pytest.fixture
def moto_s3() -> Iterator[str]:
    with moto_process(ttl_interval_seconds=0.2) as moto:
        yield moto.endpoint


def test_writer_processes_append_to_an_s3_lake_at_once(moto_s3: str) -> None:
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=moto_s3,
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    root = f"s3://{bucket}/entitlements"
    assert _run_writers(root, moto_s3) == [0] * WRITERS
    _check(
        open_lake(root, endpoint_url=moto_s3, region="eu-west-1", access_key="testing", secret_key="testing")
    )

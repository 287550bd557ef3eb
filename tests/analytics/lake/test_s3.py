"""analytics/lake/_filesystem.py: an s3:// lake round trip on moto's S3 (loopback only, in a process of its
own: delta-rs holds the interpreter while it waits for S3, so an in-process moto could never answer)."""

from __future__ import annotations

import uuid

import boto3
import pytest
from deltalake.exceptions import DeltaError

from analytics.lake import Lake, LakeHandler, open_lake
from analytics.lake._delta import open_table
from analytics.lake.compaction import compact
from analytics.lake.purge import purge_users
from analytics.lake.snapshots import read_snapshot, snapshot, state_as_of
from analytics.lake.views import connect
from config import LakeSettings
from tests.analytics.lakesim import TableSim, replay, state_rows


@pytest.fixture
def moto_s3(moto_s3_endpoint: str) -> str:
    """The run's moto process (tests/analytics/lake/conftest.py); each lake is in a bucket of its own."""
    return moto_s3_endpoint


@pytest.fixture
def s3_lake(moto_s3: str) -> Lake:
    moto_endpoint = moto_s3
    assert moto_endpoint.startswith("http://127.0.0.1:")
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="eu-west-1")
    client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    return open_lake(
        f"s3://{bucket}/entitlements",
        endpoint_url=moto_endpoint,
        region="eu-west-1",
        access_key="testing",
        secret_key="testing",
    )


def test_an_s3_lake_lands_compacts_snapshots_and_answers_sql(s3_lake: Lake) -> None:
    sim = TableSim(shards=("shardId-00000001-aaaa", "shardId-00000002-bbbb"), seed=21)
    sim.random_history(users=8, operations=80)
    handler = LakeHandler(s3_lake, LakeSettings(flush_rows=15))
    for event in sim.events:
        handler.add(event)
    for outcome in sim.outcomes:
        handler.add_outcome(outcome)
    handler.flush()
    handler = LakeHandler(s3_lake, LakeSettings(flush_rows=23))  # a replay with other boundaries
    for event in sim.events[:40]:
        handler.add(event)
    handler.flush()

    con = connect(s3_lake)
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(sim.events),)]
    assert con.execute("SELECT count(*) FROM outcomes").fetchall() == [(len(sim.outcomes),)]
    assert state_rows(con.sql("SELECT * FROM current_items").to_arrow_table()) == replay(sim.events)

    snapshot(s3_lake)
    compact(s3_lake, small_file_bytes=10**9)
    result = snapshot(s3_lake)
    assert result.files_read == 0
    assert state_rows(read_snapshot(s3_lake)) == replay(sim.events)
    instant = sim.events[len(sim.events) // 2].created_at
    assert state_rows(state_as_of(s3_lake, instant)) == replay(sim.events, as_of=instant)
    con = connect(s3_lake, from_snapshot=True)
    assert con.execute("SELECT count(*) FROM raw_changes").fetchall() == [(len(sim.events),)]
    assert state_rows(con.sql("SELECT * FROM current_items").to_arrow_table()) == replay(sim.events)

    counts = purge_users(s3_lake, ["u001"])
    assert counts.rows["changes"] == sum(1 for e in sim.events if e.user_id == "u001")
    assert connect(s3_lake).execute("SELECT count(*) FROM changes WHERE user_id = 'u001'").fetchall() == [
        (0,)
    ]


def test_a_compaction_planned_before_a_purge_on_s3_cannot_write_the_purged_rows_back(s3_lake: Lake) -> None:
    sim = TableSim(shards=("shardId-00000001-aaaa",), seed=23)
    sim.random_history(users=6, operations=60)
    handler = LakeHandler(s3_lake, LakeSettings(flush_rows=9))
    for event in sim.events:
        handler.add(event)
    handler.flush()
    compactor = open_table(s3_lake, "changes")  # the compaction reads the table as it is now
    assert compactor is not None
    purge_users(s3_lake, ["u001"])  # the purge commits first
    with pytest.raises(DeltaError):
        compactor.optimize.compact(target_size=10**9)
    con = connect(s3_lake)
    assert con.execute("SELECT count(*) FROM raw_changes WHERE user_id = 'u001'").fetchall() == [(0,)]
    kept = [e for e in sim.events if e.user_id != "u001"]
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(kept),)]

"""Fixtures for tests that run on both kinds of lake: `any_lake` is a fresh local lake, then a fresh
lake on moto's S3 (loopback only; moto in a process of its own, one per test run (per xdist worker), each
lake in a bucket of its own: delta-rs holds the interpreter while it waits for S3, so an in-process moto
could never answer)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import boto3
import pytest

from analytics.lake import Lake, open_lake
from devstack.moto_process import moto_process


@pytest.fixture(scope="session")
def moto_s3_endpoint() -> Iterator[str]:
    with moto_process() as moto:
        assert moto.endpoint.startswith("http://127.0.0.1:")
        yield moto.endpoint


def new_s3_root(endpoint: str) -> str:
    """A new bucket on the moto at `endpoint`; returns the lake root in it."""
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    return f"s3://{bucket}/entitlements"


def new_s3_lake(endpoint: str) -> Lake:
    """A lake under a bucket of its own on the moto at `endpoint`."""
    return open_lake(
        new_s3_root(endpoint),
        endpoint_url=endpoint,
        region="eu-west-1",
        access_key="testing",
        secret_key="testing",
    )


@pytest.fixture(params=["local", "s3"])
def any_lake(request: pytest.FixtureRequest) -> Lake:
    if request.param == "local":
        lake: Lake = request.getfixturevalue("lake")
        return lake
    return new_s3_lake(request.getfixturevalue("moto_s3_endpoint"))

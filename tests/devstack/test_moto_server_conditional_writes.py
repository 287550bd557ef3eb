"""S3 conditional writes on the local stack's moto are atomic, as on S3: of many racing `If-None-Match: *`
PUTs of one key exactly one succeeds and the others are refused (412), and the object holds the winner's
bytes. (moto 5.2.5 checks the condition and stores the object in two steps; `MotoServer` serialises
conditional writes so the race cannot let two writers both win one Delta log version.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.s3.models import S3Backend

from devstack.moto_server import MotoServer
from tests.support.dynamodb import REGION, client

WRITERS = 8
KEYS = 10


@pytest.fixture(scope="module")
def server() -> Iterator[MotoServer]:
    with MotoServer() as running:
        yield running


@pytest.fixture
def slow_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's store step takes 20 ms (a loaded machine's scheduling, made certain): the window between
    its condition check and its store is wide open to a racing writer."""
    store = S3Backend.put_object

    def slowly(self: S3Backend, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.02)
        return store(self, *args, **kwargs)

    monkeypatch.setattr(S3Backend, "put_object", slowly)


def _race(endpoint: str, bucket: str, key: str) -> tuple[list[int], bytes]:
    """WRITERS threads PUT `key` only-if-absent at one instant; returns who won and what is stored."""
    s3 = client(endpoint, "s3")
    start = threading.Barrier(WRITERS)
    won: list[int] = []

    def write(writer: int) -> None:
        start.wait()
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=f"writer {writer}".encode(), IfNoneMatch="*")
        except ClientError as error:
            assert error.response["Error"]["Code"] in ("PreconditionFailed", "412")
            return
        won.append(writer)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return won, stored


@pytest.mark.usefixtures("slow_store")
def test_of_racing_only_if_absent_puts_of_one_key_exactly_one_wins_and_its_bytes_stay(
    server: MotoServer,
) -> None:
    s3 = client(server.endpoint, "s3")
    s3.create_bucket(Bucket="conditional-race", CreateBucketConfiguration={"LocationConstraint": REGION})
    outcomes = [_race(server.endpoint, "conditional-race", f"_delta_log/{n:020d}.json") for n in range(KEYS)]
    assert [len(won) for won, _ in outcomes] == [1] * KEYS
    assert [stored for _, stored in outcomes] == [f"writer {won[0]}".encode() for won, _ in outcomes]


def test_an_only_if_absent_put_of_an_existing_key_is_refused(server: MotoServer) -> None:
    s3 = client(server.endpoint, "s3")
    s3.create_bucket(Bucket="conditional-once", CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket="conditional-once", Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket="conditional-once", Key="k", Body=b"second", IfNoneMatch="*")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3.get_object(Bucket="conditional-once", Key="k")["Body"].read() == b"first"

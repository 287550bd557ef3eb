"""Fixtures for the erasure subscriber's tests: SNS, SQS, DynamoDB and CloudWatch on the session's moto
server, the fake Array, a local lake, the consumer's stores and a worker wired to all of them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from adapters import HttpArrayClient
from analytics import Lake, open_lake
from analytics.lake.eraser import AnalyticsLakeEraser
from config import ArraySettings, ErasureSettings
from devstack.fake_array import FakeArrayServer
from pipeline.tables import create_table
from processors.erasure import (
    ConsumerStores,
    ErasureLedger,
    ErasureTargets,
    ErasureWorker,
    ensure_erasure_channel,
)
from processors.erasure._lake import LakeEraser
from schema.clock import SystemClock
from schema.outcomes import FlushingSink
from tests.processors.erasure.erasure_subscriber_helpers import Responses, Stack
from tests.support.dynamodb import client

LEDGER_KEY = SecretStr("test-erasure-ledger-key")


@pytest.fixture(scope="session")
def sqs(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "sqs")


@pytest.fixture(scope="session")
def sns(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "sns")


@pytest.fixture(scope="session")
def dynamodb(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "dynamodb")


@pytest.fixture(scope="session")
def streams(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "dynamodbstreams")


@pytest.fixture(scope="session")
def cloudwatch(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "cloudwatch")


@pytest.fixture
def table(dynamodb: Any) -> Any:
    return create_table(dynamodb, f"entitlements-{uuid.uuid4().hex[:12]}", sleep=lambda _: None)


@pytest.fixture
def fake_array() -> Iterator[FakeArrayServer]:
    server = FakeArrayServer(host="127.0.0.1", port=0).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def array_client(fake_array: FakeArrayServer) -> Iterator[HttpArrayClient]:
    settings = ArraySettings(base_url=fake_array.url, timeout_seconds=0.5, max_attempts=3)
    array = HttpArrayClient(settings, backoff_base_seconds=0.01, backoff_max_seconds=0.05)
    try:
        yield array
    finally:
        array.close()


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return open_lake(str(tmp_path / "lake"))


@pytest.fixture
def lake_eraser(lake: Lake) -> AnalyticsLakeEraser:
    return AnalyticsLakeEraser(lake)


@pytest.fixture
def ledger(state_dir: Path) -> ErasureLedger:
    return ErasureLedger(state_dir / "erasure-ledger", LEDGER_KEY)


@pytest.fixture
def stores(state_dir: Path) -> ConsumerStores:
    return ConsumerStores(state_dir / "quarantine", state_dir / "parked", state_dir / "dead-letter")


def erasure_settings(**overrides: Any) -> ErasureSettings:
    suffix = uuid.uuid4().hex[:10]
    values: dict[str, Any] = {
        "subscriber": "entitlements",
        "topic_name": f"erasure-requests-{suffix}",
        "queue_name": f"entitlements-erasure-{suffix}",
        "responses_queue_name": f"erasure-responses-{suffix}",
        "handler_timeout_seconds": 2.0,
        "batch_timeout_seconds": 2.0,
        "pass_two_delay_seconds": 0,
        "metrics_namespace": f"Test/Erasure/{suffix}",
        "ledger_key": LEDGER_KEY,
    }
    values.update(overrides)
    return ErasureSettings(**values)


StackFactory = Callable[..., Stack]


@pytest.fixture
def targets(
    dynamodb: Any,
    table: Any,
    array_client: HttpArrayClient,
    lake_eraser: AnalyticsLakeEraser,
    stores: ConsumerStores,
    ledger: ErasureLedger,
) -> ErasureTargets:
    return ErasureTargets(
        dynamodb=dynamodb,
        table_name=table.table_name,
        array=array_client,
        lake=lake_eraser,
        stores=stores,
        ledger=ledger,
    )


@pytest.fixture
def make_stack(sqs: Any, sns: Any, cloudwatch: Any, targets: ErasureTargets) -> Iterator[StackFactory]:
    workers: list[ErasureWorker] = []

    def make(
        *,
        lake: LakeEraser | None = None,
        outcomes: FlushingSink | None = None,
        clock: Any = None,
        **overrides: Any,
    ) -> Stack:
        settings = erasure_settings(**overrides)
        channel = ensure_erasure_channel(sqs, sns, settings)
        worker = ErasureWorker(
            settings=settings,
            sqs=sqs,
            cloudwatch=cloudwatch,
            queue_url=channel.queue_url,
            responses_queue_url=channel.responses_queue_url,
            targets=targets if lake is None else replace(targets, lake=lake),
            clock=clock or SystemClock(),
            outcomes=outcomes,
        )
        worker.verify_queue()
        workers.append(worker)
        return Stack(settings, sqs, sns, channel, worker, Responses(sqs, channel.responses_queue_url))

    yield make
    for worker in workers:
        worker.close()

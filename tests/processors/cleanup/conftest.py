"""Fixtures for the cleanup processor's tests: a fake Array, a moto-backed table and retry queues,
events built directly, an in-memory outcome sink and a fixed clock."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from adapters import HttpArrayClient
from config import ArraySettings
from devstack.fake_array import FakeArrayServer
from pipeline.events import CleanupExpired
from pipeline.tables import create_table
from processors.cleanup import CleanupHandler, RetryQueues, ensure_retry_queues
from schema.table import entitlement_key, gsi1_key
from tests.processors.cleanup.cleanup_helpers import FixedClock, ListSink, make_expiry, receive_all


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def fake_array() -> Iterator[FakeArrayServer]:
    server = FakeArrayServer(host="127.0.0.1", port=0).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def array_settings(fake_array: FakeArrayServer) -> ArraySettings:
    return ArraySettings(
        base_url=fake_array.url, timeout_seconds=0.5, max_attempts=3, retry_budget_seconds=3.0, concurrency=4
    )


@pytest.fixture
def array_client(array_settings: ArraySettings) -> Iterator[HttpArrayClient]:
    client = HttpArrayClient(array_settings, backoff_base_seconds=0.01, backoff_max_seconds=0.05)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def dynamodb(moto_endpoint: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=moto_endpoint, region_name="eu-west-1")


@pytest.fixture(scope="session")
def sqs(moto_endpoint: str) -> Any:
    return boto3.client("sqs", endpoint_url=moto_endpoint, region_name="eu-west-1")


@pytest.fixture
def table(dynamodb: Any) -> str:
    """A fresh table as the contract describes it: pk/sk, GSI1 on gsi1pk/gsi1sk, a stream, TTL."""
    name = f"entitlements-{uuid.uuid4().hex[:12]}"
    create_table(dynamodb, name)
    return name


@pytest.fixture
def make_handler(
    dynamodb: Any,
    sqs: Any,
    table: str,
    retry_queues: RetryQueues,
    array_client: HttpArrayClient,
    sink: ListSink,
    clock: FixedClock,
) -> Callable[..., CleanupHandler]:
    """A CleanupHandler on this test's table, retry queue, Array client, sink and clock; keyword
    arguments replace any of them or set the handler's options (its own defaults otherwise)."""

    def make(**overrides: Any) -> CleanupHandler:
        arguments: dict[str, Any] = {
            "dynamodb": dynamodb,
            "sqs": sqs,
            "array": array_client,
            "table_name": table,
            "retry_queue_url": retry_queues.queue_url,
            "sink": sink,
            "clock": clock,
        }
        arguments.update(overrides)
        return CleanupHandler(**arguments)

    return make


@pytest.fixture
def retry_queues(sqs: Any) -> RetryQueues:
    return ensure_retry_queues(
        sqs, f"cleanup-retry-{uuid.uuid4().hex[:12]}", visibility_timeout_seconds=30, max_receive_count=5
    )


def _row_item(user_id: str, account: str, status: str) -> dict[str, Any]:
    item = {
        **entitlement_key(user_id, account),
        **gsi1_key(account),
        "userId": user_id,
        "arrayAccountId": account,
        "status": status,
        "createdAt": "2026-01-01T00:00:00+00:00",
        "updatedAt": "2026-01-01T00:00:00+00:00",
    }
    return {name: {"S": value} for name, value in item.items()}


@pytest.fixture
def put_row(dynamodb: Any, table: str) -> Callable[[str, str, str], None]:
    def put(user_id: str, account: str, status: str) -> None:
        dynamodb.put_item(TableName=table, Item=_row_item(user_id, account, status))

    return put


@pytest.fixture
def put_rows(dynamodb: Any, table: str) -> Callable[[list[tuple[str, str, str]]], None]:
    def put(rows: list[tuple[str, str, str]]) -> None:
        for start in range(0, len(rows), 25):
            dynamodb.batch_write_item(
                RequestItems={
                    table: [{"PutRequest": {"Item": _row_item(*row)}} for row in rows[start : start + 25]]
                }
            )

    return put


@pytest.fixture
def get_row(dynamodb: Any, table: str) -> Callable[[str, str], dict[str, str] | None]:
    def get(user_id: str, account: str) -> dict[str, str] | None:
        item = dynamodb.get_item(
            TableName=table, Key={k: {"S": v} for k, v in entitlement_key(user_id, account).items()}
        ).get("Item")
        if item is None:
            return None
        return {name: value["S"] for name, value in item.items() if "S" in value}

    return get


@pytest.fixture
def expiry() -> Callable[..., CleanupExpired]:
    return make_expiry


@pytest.fixture
def drain_queue(sqs: Any) -> Callable[[str], list[dict[str, Any]]]:
    def drain(queue_url: str) -> list[dict[str, Any]]:
        return receive_all(sqs, queue_url)

    return drain


class _Silent:
    """A loopback server that accepts every connection and never answers: a hung dependency."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._connections: list[socket.socket] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _accept(self) -> None:
        self._listener.settimeout(0.05)
        while not self._stopped.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._connections.append(connection)

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        self._listener.close()
        for connection in self._connections:  # a call still waiting on one fails now
            connection.close()


@pytest.fixture
def hanging_endpoint() -> Iterator[str]:
    """The URL of a loopback server that accepts connections and never answers."""
    server = _Silent()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def hung_client(hanging_endpoint: str) -> Callable[..., Any]:
    """A boto3 client of `service` on the hanging endpoint; `read_timeout` (seconds) as given."""

    def make(service: str, *, read_timeout: float, **config: Any) -> Any:
        return boto3.client(
            service,
            endpoint_url=hanging_endpoint,
            region_name="eu-west-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(
                connect_timeout=1,
                read_timeout=read_timeout,
                retries={"mode": "standard", "total_max_attempts": 1},
                **config,
            ),
        )

    return make

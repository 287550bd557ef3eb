"""Fixtures for the service tests: a fresh table on the session moto server, and Array and
transactions-service as small in-process fakes behind `httpx.MockTransport` (no socket is opened; the
base URLs are loopback all the same)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError
from fastapi.testclient import TestClient

from adapters import HttpArrayAccounts, HttpTransactions, RetryPolicy
from config import ArraySettings, PolicySettings, ServiceSettings
from pipeline.tables import create_table
from schema import array as wire
from schema.outcomes import OutcomeEvent, OutcomeKind
from service.app import ServiceParts, create_app
from service.arraylink import ArrayLink
from service.clients import SERVICE_ERRORS
from service.dynamo import EntitlementTable
from service.outcomes import OutcomeRecorder
from service.writes import EntitlementService
from tests.support.dynamodb import FixedClock, get_item, unique_table_name

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
CANARY = "PTOK-CANARY-3f9a1c0e5b7d42e8a6"  # a processor token to search for everywhere
ARRAY_URL = "http://127.0.0.1:9"
TRANSACTIONS_URL = "http://127.0.0.1:10"


@dataclass
class FakeDownstream:
    """Array's create-user and processor-token calls and transactions-service's primary account.

    `*_statuses`: statuses to answer next (popped one per call; then 200). `same_account`: create-user
    answers the account the user already holds. `before_*`: hooks run inside a call (to force a race)."""

    token: str = CANARY
    same_account: bool = False
    create_statuses: list[int] = field(default_factory=list)
    token_statuses: list[int] = field(default_factory=list)
    transactions_statuses: list[int] = field(default_factory=list)
    before_create_user: Callable[[], None] | None = None
    before_processor_token: Callable[[], None] | None = None
    accounts: dict[str, list[str]] = field(default_factory=dict)
    tokens_received: list[tuple[str, str]] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path.endswith("/primary-account"):
            self.calls["primary_account"] += 1
            if self.transactions_statuses:
                return httpx.Response(self.transactions_statuses.pop(0))
            return httpx.Response(200, json={"accountId": "acct-primary", "processorToken": self.token})
        body = json.loads(request.content)
        if path == wire.PROCESSOR_TOKEN_PATH:
            self.calls["processor_token"] += 1
            if self.before_processor_token is not None:
                self.before_processor_token()
            if self.token_statuses:
                return httpx.Response(self.token_statuses.pop(0))
            self.tokens_received.append((body[wire.USER_ID_FIELD], body[wire.PROCESSOR_TOKEN_FIELD]))
            return httpx.Response(200, json={"status": "linked"})
        if path == wire.CREATE_USER_PATH:
            self.calls["create_user"] += 1
            if self.before_create_user is not None:
                self.before_create_user()
            if self.create_statuses:
                return httpx.Response(self.create_statuses.pop(0))
            held = self.accounts.setdefault(body[wire.CLIENT_KEY_FIELD], [])
            if not (self.same_account and held):
                held.append(f"array-{sum(len(a) for a in self.accounts.values()):04d}")
            return httpx.Response(201, json={wire.USER_ID_FIELD: held[-1]})
        return httpx.Response(404)


class ListSink:
    """An outcome sink keeping what it is given."""

    def __init__(self) -> None:
        self.outcomes: list[OutcomeEvent] = []
        self.flushes = 0

    def add_outcome(self, outcome: OutcomeEvent) -> None:
        self.outcomes.append(outcome)

    def flush(self) -> None:
        self.flushes += 1


def throttled_error(operation: str) -> ClientError:
    error = {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}
    return ClientError({"Error": error}, operation)


class CountingDynamoDB:
    """A boto3 DynamoDB client that counts its write calls and can fail (throttled) the next puts,
    queries or transactions (`fail_*`: how many). `before_transact` / `before_put`: a hook run once,
    inside the next TransactWriteItems / PutItem before it is sent (to force a race between the
    service's read and its write)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.writes = 0
        self.fail_puts = 0
        self.fail_queries = 0
        self.fail_transacts = 0
        self.before_transact: Callable[[], None] | None = None
        self.before_put: Callable[[], None] | None = None

    def query(self, **kwargs: Any) -> dict[str, Any]:
        if self.fail_queries:
            self.fail_queries -= 1
            raise throttled_error("Query")
        result: dict[str, Any] = self._inner.query(**kwargs)
        return result

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        hook, self.before_put = self.before_put, None
        if hook is not None:
            hook()
        if self.fail_puts:
            self.fail_puts -= 1
            raise throttled_error("PutItem")
        self.writes += 1
        result: dict[str, Any] = self._inner.put_item(**kwargs)
        return result

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        hook, self.before_transact = self.before_transact, None
        if hook is not None:
            hook()
        if self.fail_transacts:
            self.fail_transacts -= 1
            raise throttled_error("TransactWriteItems")
        self.writes += 1
        result: dict[str, Any] = self._inner.transact_write_items(**kwargs)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass
class World:
    """One service on a fresh table, its fakes and its outcomes."""

    dynamodb: Any
    counting: CountingDynamoDB
    table_name: str
    fake: FakeDownstream
    sink: ListSink
    parts: ServiceParts
    http: httpx.Client
    table: EntitlementTable
    transactions: HttpTransactions
    array: HttpArrayAccounts

    def item(self, pk: str, sk: str) -> dict[str, Any] | None:
        return get_item(self.dynamodb, self.table_name, pk, sk)

    def status(self, user_id: str, account: str) -> str | None:
        item = self.item(f"USER#{user_id}", f"ENTITLEMENT#{account}")
        return None if item is None else str(item["status"]["S"])

    def client(self) -> TestClient:
        return TestClient(create_app(self.parts))

    def recorded(self) -> list[OutcomeEvent]:
        """The outcomes besides the accounts created (`array.account_created`: every signup records
        one)."""
        return [o for o in self.sink.outcomes if o.kind is not OutcomeKind.ARRAY_ACCOUNT_CREATED]

    def accounts_created(self) -> list[tuple[str | None, str | None]]:
        """(user, account) of each `array.account_created` outcome, in order."""
        return [
            (o.user_id, o.array_account_id)
            for o in self.sink.outcomes
            if o.kind is OutcomeKind.ARRAY_ACCOUNT_CREATED
        ]


def build_world(dynamodb: Any, *, sink: Any | None = None) -> World:
    table_name = unique_table_name("svc")
    create_table(dynamodb, table_name)
    fake = FakeDownstream()
    http = httpx.Client(transport=httpx.MockTransport(fake.handler))
    retry = RetryPolicy(attempts=3, base_seconds=0.001, max_seconds=0.001, sleep=lambda _: None)
    counting = CountingDynamoDB(dynamodb)
    table = EntitlementTable(counting, table_name, retry=retry)
    settings = ServiceSettings(transactions_base_url=TRANSACTIONS_URL)
    array = HttpArrayAccounts(
        ArraySettings(base_url=ARRAY_URL), settings, http=http, retry=retry, errors=SERVICE_ERRORS
    )
    transactions = HttpTransactions(settings, http=http, retry=retry, errors=SERVICE_ERRORS)
    list_sink = ListSink()
    recorder = OutcomeRecorder(sink or list_sink, FixedClock(NOW))
    parts = ServiceParts(
        service=EntitlementService(table, array, FixedClock(NOW), PolicySettings(), recorder),
        arraylink=ArrayLink(table, transactions, array),
        recorder=recorder,
        outcome_flush_seconds=60.0,
    )
    return World(dynamodb, counting, table_name, fake, list_sink, parts, http, table, transactions, array)


@pytest.fixture
def world(dynamodb: Any) -> Iterator[World]:
    built = build_world(dynamodb)
    yield built
    built.http.close()

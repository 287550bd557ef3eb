"""The service under concurrent requests for one user, through `entitlements serve` on the local stack
(moto, the fake Array and transactions-service), against one and two service processes: N requests at
once (N = 2, 8, 32) of each kind and of a mix, with the fake Array holding its replies until all have
arrived, so that every request reads the user's items before any writes. Whatever the interleaving, the
table itself (read directly) holds at most one Active row for the user, every account that stopped
being Active has its cleanup record, every account Array created is a row's or scheduled, and every
answer is a 2xx or a documented refusal (docs/table.md, "Concurrent requests").

One stack for the module: the fakes in this process, the service processes started once."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from config import settings_environment
from devstack.fake_array import CREATE_USER, PROCESSOR_TOKEN
from pipeline.tables import create_table
from tests.support.dynamodb import unique_table_name
from tests.support.local_world import World, local_world

# The refusals a request losing a race may get, each documented in docs/table.md (and 404
# entitlement_not_active for a link whose row stopped being Active: the service design's answer).
DOCUMENTED_409 = {
    "concurrent_request",
    "not_active",
    "already_active",
    "no_cancellation",
    "not_cancelled",
    "signed_up_before",
}
KINDS = ("signup", "array-signup", "cancellation", "reactivation", "processor")
_serial = itertools.count()
_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Stack:
    world: World
    dynamodb: Any
    table_name: str
    urls: list[str]
    # One client for every request of the module: httpx.post builds a Client per call, and each
    # Client loads the CA bundle into a new SSL context (about 45 ms CPU, unused on http://), which over
    # the module's ~550 requests was more than half its CPU. A Client is safe to share between threads; its
    # pool (limits below) opens a connection per request in flight, so a burst still arrives at once.
    http: httpx.Client


def _serve(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    entry = Path(sys.executable).with_name("entitlements")
    with log.open("wb") as sink:
        return subprocess.Popen(
            [str(entry), "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, http: httpx.Client) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"entitlements serve exited: {log.read_text()[-2000:]}")
        try:
            if http.get(f"{url}/stats", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("entitlements serve did not answer within 60 s")


@pytest.fixture(scope="module")
def stack(moto_endpoint: str, dynamodb: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    table_name = unique_table_name("race")
    create_table(dynamodb, table_name)
    state = tmp_path_factory.mktemp("race")
    with local_world(endpoint=moto_endpoint, table_name=table_name, state_dir=state) as world:
        base = {
            **os.environ,
            **settings_environment(world.settings),
            "AWS_EC2_METADATA_DISABLED": "true",
            # Longer than any hold: a create-user retried after a client timeout may make a second
            # account the service never learns of (docs/local-stack.md), which is not what this tests.
            "ENTITLEMENTS_SERVICE__HTTP_TIMEOUT_SECONDS": "30",
            # The source tree under test first, whatever the environment's install holds.
            "PYTHONPATH": os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        processes: list[subprocess.Popen[bytes]] = []
        urls: list[str] = []
        # More connections than the largest burst (32), so no request waits for one. An idle connection
        # is dropped after 1 s, well before uvicorn closes it (5 s keep-alive): at httpx's default of 5 s
        # a request sent on a connection the server was closing that moment was reset (ReadError,
        # RemoteProtocolError), which a POST is not retried on.
        http = httpx.Client(
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64, keepalive_expiry=1.0)
        )
        try:
            logs: list[Path] = []
            for index in range(2):
                port = _free_port()
                # Each process lands its outcomes in a lake of its own (they are not what is checked).
                env = {**base, "ENTITLEMENTS_LAKE__ROOT": str(state / f"lake-{index}")}
                env.pop("ENTITLEMENTS_METRICS__SERVICE_PORT", None)
                logs.append(state / f"serve-{index}.log")
                processes.append(_serve(env, port, logs[-1]))
                urls.append(f"http://127.0.0.1:{port}")
            # Both started before either is waited for: their start-ups overlap.
            for url, process, log in zip(urls, processes, logs, strict=True):
                _wait_ready(url, process, log, http)
            yield Stack(world, dynamodb, table_name, urls, http)
        finally:
            http.close()
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()


# -- the user's state, read from the table itself -----------------------------------------------------


def _partition(stack: Stack, user: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {
        "TableName": stack.table_name,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": f"USER#{user}"}},
        "ConsistentRead": True,
    }
    while True:
        page = stack.dynamodb.query(**request)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _check_invariants(stack: Stack, user: str, answers: list[tuple[str, int, dict[str, Any]]]) -> None:
    items = _partition(stack, user)
    rows = [i for i in items if i["sk"]["S"].startswith("ENTITLEMENT#")]
    active = [r for r in rows if r["status"]["S"] == "Active"]
    assert len(active) <= 1, f"{len(active)} Active rows"
    scheduled = {i["arrayAccountId"]["S"] for i in items if i["sk"]["S"].startswith("CLEANUP#")}
    for row in rows:
        if row["status"]["S"] != "Active":  # Superseded or Cancelled: its account is scheduled
            assert row["arrayAccountId"]["S"] in scheduled, f"a {row['status']['S']} row without cleanup"
    named = {r["arrayAccountId"]["S"] for r in rows} | scheduled
    created = set(stack.world.array.accounts_created_for(user))
    tally = Counter((route, status, body.get("error")) for route, status, body in answers)
    assert created <= named, f"{len(created - named)} Array accounts neither a row's nor scheduled: {tally}"


# -- driving requests ---------------------------------------------------------------------------------


def _prepare(stack: Stack, user: str, kind: str) -> None:
    """The state each kind acts on: nothing for a signup, an Active row, or a cancelled one."""
    if kind == "signup":
        return
    assert stack.http.post(f"{stack.urls[0]}/{user}/signup", timeout=30).status_code == 201
    if kind == "reactivation":
        assert stack.http.post(f"{stack.urls[0]}/{user}/cancellation", timeout=30).status_code == 200


def _burst(
    stack: Stack, user: str, routes: list[str], processes: int
) -> list[tuple[str, int, dict[str, Any]]]:
    """Send every route at once for the user, the fake Array holding each create-user and
    processor-token call until all have been sent and those that call Array have arrived (or 10 s)."""
    event = f"release-{user}"
    array = stack.world.array
    account = None
    rows = [i for i in _partition(stack, user) if i["sk"]["S"].startswith("ENTITLEMENT#")]
    if rows:
        account = rows[0]["arrayAccountId"]["S"]
    creating = array.hold(CREATE_USER, until=event, key=user, times=len(routes))
    linking = array.hold(PROCESSOR_TOKEN, until=event, key=account, times=len(routes)) if account else None
    expected = sum(1 for r in routes if r in ("signup", "array-signup", "processor"))

    def send(index: int, route: str) -> tuple[str, int, dict[str, Any]]:
        url = stack.urls[index % processes]
        answer = stack.http.post(f"{url}/{user}/{route}", timeout=60)
        return route, answer.status_code, answer.json()

    with ThreadPoolExecutor(max_workers=len(routes)) as pool:
        futures = [pool.submit(send, index, route) for index, route in enumerate(routes)]
        # Let go when every call that goes to Array has arrived, or none has arrived for 1 s (in a
        # mix, a request finding the user cancelled never calls Array), or after 10 s.
        deadline, quiet_since, seen = time.monotonic() + 10.0, time.monotonic(), 0
        while time.monotonic() < deadline:
            arrived = creating.held + (linking.held if linking else 0)
            if arrived >= expected:
                break
            if arrived != seen:
                seen, quiet_since = arrived, time.monotonic()
            elif arrived and time.monotonic() - quiet_since > 1.0:
                break
            time.sleep(0.02)
        stack.world.hooks.set(event)
        return [future.result() for future in futures]


def _documented(route: str, status: int, body: dict[str, Any]) -> bool:
    if 200 <= status < 300:
        return True
    if status == 409:
        return body.get("error") in DOCUMENTED_409
    return route == "processor" and (status, body.get("error")) == (404, "entitlement_not_active")


@pytest.mark.parametrize("processes", [1, 2], ids=["one-process", "two-processes"])
@pytest.mark.parametrize("n", [2, 8, 32])
@pytest.mark.parametrize("kind", [*KINDS, "mix"])
def test_concurrent_requests_for_one_user_leave_one_active_row_and_every_account_scheduled(
    stack: Stack, kind: str, n: int, processes: int
) -> None:
    user = f"race-{kind}-{n}-{processes}-{next(_serial)}"
    _prepare(stack, user, "array-signup" if kind == "mix" else kind)
    before = {
        i["arrayAccountId"]["S"] for i in _partition(stack, user) if i["sk"]["S"].startswith("ENTITLEMENT#")
    }
    routes = [KINDS[(i + 1) % len(KINDS)] for i in range(n)] if kind == "mix" else [kind] * n
    answers = _burst(stack, user, routes, processes)
    refused = [
        (route, status, body) for route, status, body in answers if not _documented(route, status, body)
    ]
    assert refused == []
    _check_invariants(stack, user, answers)
    if kind in ("signup", "array-signup", "processor"):
        rows = [i for i in _partition(stack, user) if i["sk"]["S"].startswith("ENTITLEMENT#")]
        assert [r["status"]["S"] for r in rows].count("Active") == 1
    made = sum(1 for _, status, _ in answers if status == _MADE_BY.get(kind))
    if kind == "array-signup":
        # Each second signup answered 201 retired one row (the one Active before it: the first account or
        # another 201's); one that read after another had committed (it reached the service after the
        # holds were let go) is a second signup of its own. A loser's account is Superseded too, but was
        # never Active: it is no 201's account.
        rows = [i for i in _partition(stack, user) if i["sk"]["S"].startswith("ENTITLEMENT#")]
        answered = before | {body["arrayAccountId"] for _, status, body in answers if status == 201}
        retired = [
            r for r in rows if r["status"]["S"] == "Superseded" and r["arrayAccountId"]["S"] in answered
        ]
        assert made == len(retired) >= 1
    elif kind in _MADE_BY:
        # Exactly one request made the change: after it the user is no longer in the state the others
        # act on, whenever they read; every other got that state's answer or a documented 409.
        assert made == 1


# The status of a request that makes each change (a signup finding the user Active answers 200).
_MADE_BY = {"signup": 201, "array-signup": 201, "cancellation": 200, "reactivation": 200}

"""The fake transactions-service: the user's primary account on loopback, with knobs and hooks."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from devstack._fake_http import Hooks
from devstack.fake_array import PROCESSOR_TOKEN, FakeArrayServer
from devstack.fake_transactions import FakeTransactionsServer
from schema import array as wire


@pytest.fixture
def server() -> Iterator[FakeTransactionsServer]:
    with FakeTransactionsServer() as running:
        yield running


@pytest.fixture
def http(server: FakeTransactionsServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=5) as client:
        yield client


def test_it_refuses_to_bind_anything_but_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        FakeTransactionsServer(host="0.0.0.0")


def test_every_user_has_a_stable_primary_account_and_token(
    server: FakeTransactionsServer, http: httpx.Client
) -> None:
    first = http.get(wire.primary_account_path("u1")).json()
    assert first == http.get(wire.primary_account_path("u1")).json()
    assert first == {
        wire.ACCOUNT_ID_FIELD: server.primary_account("u1"),
        wire.PROCESSOR_TOKEN_FIELD: server.processor_token("u1"),
    }


def test_a_named_primary_account_is_served(server: FakeTransactionsServer, http: httpx.Client) -> None:
    server.set_primary("u1", "acc-chosen")
    assert http.get(wire.primary_account_path("u1")).json()[wire.ACCOUNT_ID_FIELD] == "acc-chosen"


def test_a_user_without_a_primary_account_answers_404(
    server: FakeTransactionsServer, http: httpx.Client
) -> None:
    server.remove_primary("u1")
    assert http.get(wire.primary_account_path("u1")).status_code == 404


def test_other_methods_and_paths_are_refused(http: httpx.Client) -> None:
    assert http.post(wire.primary_account_path("u1")).status_code == 405
    assert http.get("/users/u1").status_code == 404


def test_an_error_rate_of_one_answers_5xx_and_is_counted(
    server: FakeTransactionsServer, http: httpx.Client
) -> None:
    server.set_faults(error_rate=1.0)
    assert http.get(wire.primary_account_path("u1")).status_code in (500, 502, 503)
    server.clear_faults()
    assert http.get(wire.primary_account_path("u1")).status_code == 200
    assert (server.call_count(), server.call_count(status=200)) == (2, 1)


def test_a_hold_keeps_the_call_until_its_event(server: FakeTransactionsServer, http: httpx.Client) -> None:
    hold = server.hold(key="u1", until="go")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(http.get, wire.primary_account_path("u1"))
        assert hold.wait_arrived(5)
        assert not pending.done()
        server.hooks.set("go")
        assert pending.result(5).status_code == 200


def test_shared_hooks_release_calls_held_at_both_fakes_with_one_event() -> None:
    hooks = Hooks()
    with (
        FakeTransactionsServer(hooks=hooks) as transactions,
        FakeArrayServer(hooks=hooks) as array,
        ThreadPoolExecutor(2) as pool,
    ):
        array.add_users(["arr-1"])
        held_here = transactions.hold(key="u1", until="race")
        held_there = array.hold(PROCESSOR_TOKEN, key="arr-1", until="race")
        first = pool.submit(httpx.get, transactions.url + wire.primary_account_path("u1"))
        second = pool.submit(
            httpx.post,
            array.url + wire.PROCESSOR_TOKEN_PATH,
            json=wire.processor_token_body("local-app-key", "arr-1", "ptok"),
            headers={wire.SERVER_TOKEN_HEADER: "local-server-token"},
        )
        assert held_here.wait_arrived(5) and held_there.wait_arrived(5)
        hooks.set("race")
        assert (first.result(5).status_code, second.result(5).status_code) == (200, 200)


def test_the_admin_paths_set_a_primary_account_and_report_counts(
    server: FakeTransactionsServer, http: httpx.Client
) -> None:
    assert http.post("/__admin/primary", json={"userId": "u1", "accountId": "acc-9"}).status_code == 200
    http.get(wire.primary_account_path("u1"))
    assert http.get("/__admin/stats").json()["by_call"]["primary_account"] == {"calls": 1, "200": 1}

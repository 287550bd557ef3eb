"""The fake Array server: real HTTP on loopback, delete-user, admin endpoints, faults and call records."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from devstack.fake_array import (
    CREATE_USER,
    DEFAULT_APP_KEY,
    DEFAULT_SERVER_TOKEN,
    PROCESSOR_TOKEN,
    FakeArrayServer,
    FaultPlan,
)

HEADERS = {"x-array-server-token": DEFAULT_SERVER_TOKEN}


@pytest.fixture
def server() -> Iterator[FakeArrayServer]:
    with FakeArrayServer(host="127.0.0.1", port=0) as running:
        yield running


@pytest.fixture
def http(server: FakeArrayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=5) as client:
        yield client


def _delete(http: httpx.Client, user_id: object, **headers: str) -> httpx.Response:
    return http.request(
        "DELETE",
        "/api/user/v2",
        json={"appKey": DEFAULT_APP_KEY, "userId": user_id},
        headers={**HEADERS, **headers},
    )


def test_it_listens_on_loopback_at_the_url_it_reports(server: FakeArrayServer) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    assert server.port > 0


def test_it_refuses_to_bind_anything_but_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        FakeArrayServer(host="0.0.0.0")


def test_deleting_a_registered_user_answers_200_and_the_user_is_gone(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    server.add_users(["array-1"])
    assert _delete(http, "array-1").status_code == 200
    assert not server.has_user("array-1")
    assert server.deleted_users() == ["array-1"]


def test_an_unknown_or_already_deleted_user_answers_404(server: FakeArrayServer, http: httpx.Client) -> None:
    server.add_users(["array-1"])
    assert _delete(http, "array-1").status_code == 200
    assert _delete(http, "array-1").status_code == 404
    assert _delete(http, "never-existed").status_code == 404


def test_post_with_the_method_override_header_is_a_delete(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    server.add_users(["array-1"])
    response = http.post(
        "/api/user/v2",
        json={"appKey": DEFAULT_APP_KEY, "userId": "array-1"},
        headers={**HEADERS, "x-http-method": "DELETE"},
    )
    assert response.status_code == 200
    assert server.calls()[0].method == "DELETE"


def test_other_methods_answer_405(http: httpx.Client) -> None:
    assert http.get("/api/user/v2").status_code == 405
    assert http.put("/api/user/v2", json={"userId": "x"}, headers=HEADERS).status_code == 405


def test_a_missing_or_wrong_server_token_answers_401(server: FakeArrayServer, http: httpx.Client) -> None:
    server.add_users(["array-1"])
    assert _delete(http, "array-1", **{"x-array-server-token": "wrong"}).status_code == 401
    no_token = http.request("DELETE", "/api/user/v2", json={"appKey": DEFAULT_APP_KEY, "userId": "array-1"})
    assert no_token.status_code == 401
    assert server.has_user("array-1")


def test_a_wrong_app_key_answers_403(server: FakeArrayServer, http: httpx.Client) -> None:
    server.add_users(["array-1"])
    response = http.request(
        "DELETE", "/api/user/v2", json={"appKey": "wrong", "userId": "array-1"}, headers=HEADERS
    )
    assert response.status_code == 403
    assert server.has_user("array-1")


@pytest.mark.parametrize("user_id", [None, "", 42])
def test_a_body_without_a_string_user_id_answers_400(http: httpx.Client, user_id: object) -> None:
    assert _delete(http, user_id).status_code == 400


def test_every_call_is_recorded_with_its_answer(server: FakeArrayServer, http: httpx.Client) -> None:
    server.add_users(["array-1"])
    _delete(http, "array-1")
    _delete(http, "array-1")
    calls = server.calls()
    assert [(c.user_id, c.status, c.deleted) for c in calls] == [
        ("array-1", 200, True),
        ("array-1", 404, False),
    ]
    assert server.call_count(status=404) == 1
    assert server.calls_for("array-1") == calls


def test_expired_credentials_refuse_for_a_number_of_calls_then_recover(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    server.add_users(["array-1"])
    server.expire_credentials(calls=2, status=403)
    assert [_delete(http, "array-1").status_code for _ in range(3)] == [403, 403, 200]
    assert server.call_count(fault="credentials") == 2


def test_expired_credentials_refuse_until_restored(server: FakeArrayServer, http: httpx.Client) -> None:
    server.add_users(["array-1"])
    server.expire_credentials()
    assert _delete(http, "array-1").status_code == 401
    server.restore_credentials()
    assert _delete(http, "array-1").status_code == 200


def test_a_429_burst_answers_the_next_calls_with_retry_after(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    server.add_users(["array-1"])
    server.throttle_next(2, retry_after_seconds=3)
    first = _delete(http, "array-1")
    assert first.status_code == 429
    assert first.headers["Retry-After"] == "3"
    assert [_delete(http, "array-1").status_code for _ in range(2)] == [429, 200]


def test_an_error_rate_of_one_answers_every_call_with_a_5xx(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    server.add_users(["array-1"])
    server.set_faults(error_rate=1.0)
    statuses = {_delete(http, "array-1").status_code for _ in range(20)}
    assert statuses <= {500, 502, 503}
    assert server.has_user("array-1")


def test_an_error_rate_fails_about_that_share_of_calls() -> None:
    with FakeArrayServer(faults=FaultPlan(error_rate=0.3), seed=7) as server, httpx.Client() as http:
        for _ in range(400):
            http.request(
                "DELETE",
                f"{server.url}/api/user/v2",
                json={"appKey": DEFAULT_APP_KEY, "userId": "x"},
                headers=HEADERS,
            )
        share = server.call_count(fault="5xx") / 400
    assert 0.2 < share < 0.4


def test_a_timeout_fault_holds_the_call_past_the_clients_timeout_then_applies_the_delete(
    server: FakeArrayServer,
) -> None:
    server.add_users(["array-1"])
    server.set_faults(timeout_rate=1.0, hang_seconds=0.5)
    with httpx.Client(base_url=server.url, timeout=0.1) as http, pytest.raises(httpx.ReadTimeout):
        _delete(http, "array-1")
    server.clear_faults()
    with httpx.Client(base_url=server.url, timeout=5) as http:
        for _ in range(100):  # the held call finishes on the server after the client gave up
            if not server.has_user("array-1"):
                break
            time.sleep(0.05)
        assert _delete(http, "array-1").status_code == 404
    assert [c.fault for c in server.calls()] == ["timeout", None]


class _SleepRecorder:
    """The fake's `time` module with its sleeps recorded, not slept: the behaviour is asserted, never
    a wall time."""

    monotonic = staticmethod(time.monotonic)

    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def test_latency_is_added_to_every_delete(
    server: FakeArrayServer, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _SleepRecorder()
    monkeypatch.setattr("devstack.fake_array.time", recorder)
    server.set_faults(latency_seconds=0.2)
    _delete(http, "array-1")
    _delete(http, "array-2")
    server.set_faults(latency_seconds=0.0)
    _delete(http, "array-3")
    assert (recorder.slept, len(server.calls())) == ([0.2, 0.2], 3)


def test_fault_plans_reject_impossible_rates() -> None:
    with pytest.raises(ValueError):
        FaultPlan(error_rate=0.7, timeout_rate=0.5)
    with pytest.raises(ValueError):
        FaultPlan(error_rate=-0.1)


def test_the_admin_endpoints_register_users_report_stats_and_set_faults(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    assert http.post("/__admin/users", json={"userIds": ["a", "b"]}).json() == {"added": 2}
    assert http.get("/__admin/users/a").status_code == 200
    assert http.get("/__admin/users/zzz").status_code == 404
    assert http.post("/__admin/users", json={"userIds": "a"}).status_code == 400
    _delete(http, "a")
    stats = http.get("/__admin/stats").json()
    assert stats["calls"] == 1
    assert stats["by_status"] == {"200": 1}
    assert stats["users"] == 1
    faults = http.post("/__admin/faults", json={"error_rate": 0.25, "latency_seconds": 0.01}).json()
    assert faults["error_rate"] == 0.25
    assert server.faults.latency_seconds == 0.01
    assert http.post("/__admin/faults", json={"error_rate": 2}).status_code == 400


def test_concurrent_calls_are_served_and_the_peak_is_recorded(server: FakeArrayServer) -> None:
    server.add_users([f"u{i}" for i in range(16)])
    server.set_faults(latency_seconds=0.1)
    with httpx.Client(base_url=server.url, timeout=5) as http, ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda i: _delete(http, f"u{i}").status_code, range(16)))
    assert statuses == [200] * 16
    assert 1 < server.max_in_flight <= 8


def test_stop_releases_the_port_and_start_twice_is_refused() -> None:
    server = FakeArrayServer().start()
    with pytest.raises(RuntimeError):
        server.start()
    url = server.url
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/__admin/stats", timeout=1)


def test_in_demo_mode_every_account_exists_until_its_first_delete() -> None:
    with FakeArrayServer(every_account_exists=True) as server:
        statuses = [
            httpx.request(
                "DELETE",
                f"{server.url}/api/user/v2",
                headers={"x-array-server-token": DEFAULT_SERVER_TOKEN},
                json={"appKey": DEFAULT_APP_KEY, "userId": "never-registered"},
            ).status_code
            for _ in range(2)
        ]
    assert statuses == [200, 404]


# ---- the service's calls: create-user and processor-token ---------------------------------------------


def _create(http: httpx.Client, user_id: object, **headers: str) -> httpx.Response:
    return http.post(
        "/api/user/v2", json={"appKey": DEFAULT_APP_KEY, "clientKey": user_id}, headers={**HEADERS, **headers}
    )


def _link(http: httpx.Client, array_user: object, token: object = "ptok-1") -> httpx.Response:
    return http.post(
        "/api/user/v2/processor-token",
        json={"appKey": DEFAULT_APP_KEY, "userId": array_user, "processorToken": token},
        headers=HEADERS,
    )


def test_create_user_answers_201_with_a_new_account_that_then_exists(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    response = _create(http, "u1")
    account = response.json()["userId"]
    assert (response.status_code, server.has_user(account)) == (201, True)
    assert server.accounts_created_for("u1") == [account]


def test_a_second_create_user_for_the_same_user_makes_another_account(http: httpx.Client) -> None:
    first, second = _create(http, "u1").json()["userId"], _create(http, "u1").json()["userId"]
    assert first != second


def test_reuse_next_answers_200_with_the_account_the_user_already_holds(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    account = _create(http, "u1").json()["userId"]
    server.reuse_next("u1")
    again = _create(http, "u1")
    assert (again.status_code, again.json()["userId"]) == (200, account)
    assert _create(http, "u1").json()["userId"] != account  # only the next call


def test_create_user_refuses_a_wrong_token_a_wrong_app_key_and_a_missing_client_key(
    http: httpx.Client,
) -> None:
    assert _create(http, "u1", **{"x-array-server-token": "wrong"}).status_code == 401
    wrong_key = http.post("/api/user/v2", json={"appKey": "wrong", "clientKey": "u1"}, headers=HEADERS)
    assert wrong_key.status_code == 403
    assert _create(http, "").status_code == 400


def test_processor_token_links_an_existing_array_user_and_404s_an_unknown_one(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    account = _create(http, "u1").json()["userId"]
    assert _link(http, account).status_code == 200
    assert _link(http, "arr-unknown").status_code == 404
    assert server.links(account) == 1


def test_processor_token_without_a_string_token_answers_400(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    server.add_users(["arr-1"])
    assert _link(http, "arr-1", token=None).status_code == 400


def test_a_deleted_account_can_no_longer_be_linked(server: FakeArrayServer, http: httpx.Client) -> None:
    account = _create(http, "u1").json()["userId"]
    assert _delete(http, account).status_code == 200
    assert _link(http, account).status_code == 404


def test_each_call_kind_has_its_own_fault_plan_and_counts(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    account = _create(http, "u1").json()["userId"]
    server.set_faults(call=PROCESSOR_TOKEN, error_rate=1.0)
    assert _link(http, account).status_code in (500, 502, 503)
    assert _create(http, "u2").status_code == 201  # create-user's plan is untouched
    assert server.call_count_of(CREATE_USER) == 2
    assert server.call_count_of(PROCESSOR_TOKEN, status=200) == 0
    assert server.calls() == []  # the delete record holds deletes only


def test_a_hold_keeps_a_processor_token_call_inside_the_fake_until_its_event(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    account = _create(http, "u1").json()["userId"]
    hold = server.hold(PROCESSOR_TOKEN, key=account, until="second-signup-done")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(_link, http, account)
        assert hold.wait_arrived(5)
        assert not pending.done()
        assert server.links(account) == 0
        server.hooks.set("second-signup-done")
        assert pending.result(5).status_code == 200
    assert hold.released.is_set()


def test_a_hold_for_one_account_lets_other_accounts_through(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    held, free = _create(http, "u1").json()["userId"], _create(http, "u2").json()["userId"]
    server.hold(PROCESSOR_TOKEN, key=held, until="never-fired")
    assert _link(http, free).status_code == 200


def test_holds_and_events_can_be_driven_over_the_admin_paths(
    server: FakeArrayServer, http: httpx.Client
) -> None:
    created = http.post("/__admin/holds", json={"call": "create_user", "key": "u1", "until": "go"}).json()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(_create, http, "u1")
        assert server.hooks.get(created["id"]) is not None
        assert server.hooks.get(created["id"]).wait_arrived(5)  # type: ignore[union-attr]
        assert http.get(f"/__admin/holds/{created['id']}").json()["arrived"] is True
        assert http.post("/__admin/events/go").status_code == 200
        assert pending.result(5).status_code == 201


def test_admin_faults_name_the_call_they_change(server: FakeArrayServer, http: httpx.Client) -> None:
    http.post("/__admin/faults", json={"call": "create_user", "latency_seconds": 0.01})
    assert server.faults_for(CREATE_USER).latency_seconds == 0.01
    assert server.faults.latency_seconds == 0.0

"""adapters/array.py, the delete-user call: request shape, status mapping, retries with jittered
backoff, deadlines, secrecy."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import httpx
import pytest
from pydantic import SecretStr

from adapters import (
    ArrayClient,
    ArrayCredentialError,
    ArrayRequestRejected,
    ArrayTransientError,
    ErrArrayUserAlreadyDeleted,
    HttpArrayAccounts,
    HttpArrayClient,
    RetryPolicy,
)
from config import ArraySettings, ServiceSettings
from devstack.fake_array import FakeArrayServer
from schema.errors import RetryableError, TerminalError

TOKEN = "s3cr3t-server-token-canary"
APP_KEY = "app-key-canary"


class FakeTime:
    """A monotonic clock that only moves when the client sleeps (or a request 'takes' time)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _client(
    handler: Callable[[httpx.Request], httpx.Response],
    *,
    time: FakeTime | None = None,
    max_attempts: int = 4,
    method_override: bool = False,
    backoff_max: float = 1.0,
) -> tuple[HttpArrayClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    clock = time or FakeTime()
    settings = ArraySettings(
        base_url="http://127.0.0.1:9/",
        app_key=SecretStr(APP_KEY),
        server_token=SecretStr(TOKEN),
        timeout_seconds=2.0,
        max_attempts=max_attempts,
    )
    client = HttpArrayClient(
        settings,
        http=httpx.Client(transport=httpx.MockTransport(record)),
        method_override=method_override,
        backoff_base_seconds=0.1,
        backoff_max_seconds=backoff_max,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )
    return client, seen


def _status(code: int, headers: dict[str, str] | None = None) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(code, headers=headers, json={})


def _sequence(*codes: int) -> Callable[[httpx.Request], httpx.Response]:
    remaining = list(codes)
    return lambda request: httpx.Response(remaining.pop(0), json={})


def test_the_client_is_an_array_client() -> None:
    client, _ = _client(_status(200))
    checked: ArrayClient = client
    assert checked is client


def test_a_delete_sends_the_documented_request_shape() -> None:
    client, seen = _client(_status(200))
    client.delete_user("array-user-1")
    [request] = seen
    assert request.method == "DELETE"
    assert request.url.path == "/api/user/v2"
    assert request.headers["x-array-server-token"] == TOKEN
    assert json.loads(request.content) == {"appKey": APP_KEY, "userId": "array-user-1"}


def test_the_method_override_sends_post_with_x_http_method_delete() -> None:
    client, seen = _client(_status(200), method_override=True)
    client.delete_user("array-user-1")
    assert seen[0].method == "POST"
    assert seen[0].headers["x-http-method"] == "DELETE"


def test_a_404_is_reported_as_already_deleted_without_retrying() -> None:
    client, seen = _client(_status(404))
    with pytest.raises(ErrArrayUserAlreadyDeleted):
        client.delete_user("array-user-1")
    assert len(seen) == 1


@pytest.mark.parametrize("code", [401, 403])
def test_a_refused_credential_is_a_credential_error_without_retrying(code: int) -> None:
    client, seen = _client(_status(code))
    with pytest.raises(ArrayCredentialError) as raised:
        client.delete_user("array-user-1")
    assert raised.value.status == code
    assert isinstance(raised.value, RetryableError)
    assert len(seen) == 1


@pytest.mark.parametrize("code", [400, 405, 409, 410, 422])
def test_any_other_4xx_is_terminal_without_retrying(code: int) -> None:
    client, seen = _client(_status(code))
    with pytest.raises(ArrayRequestRejected) as raised:
        client.delete_user("array-user-1")
    assert raised.value.code == str(code)
    assert isinstance(raised.value, TerminalError)
    assert len(seen) == 1


@pytest.mark.parametrize("code", [429, 500, 502, 503, 504])
def test_429_and_5xx_are_retried_until_success(code: int) -> None:
    client, seen = _client(_sequence(code, code, 200))
    client.delete_user("array-user-1")
    assert len(seen) == 3


def test_network_errors_are_retried() -> None:
    calls = 0

    def flaky(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise httpx.ConnectError("refused", request=request)
        if calls == 2:
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(200, json={})

    client, _ = _client(flaky)
    client.delete_user("array-user-1")
    assert calls == 3


def _first_then(
    failure: Callable[[httpx.Request], httpx.Response], then: int
) -> Callable[..., httpx.Response]:
    calls = 0

    def answer(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return failure(request) if calls == 1 else httpx.Response(then, json={})

    return answer


def _read_timeout(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("slow", request=request)


def _connect_error(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("refused", request=request)


@pytest.mark.parametrize("first", [_read_timeout, _status(503)], ids=["a read timeout", "a 5xx"])
def test_a_404_after_an_unanswered_request_of_the_same_call_says_that_request_may_have_deleted(
    first: Callable[[httpx.Request], httpx.Response],
) -> None:
    client, _ = _client(_first_then(first, 404))
    with pytest.raises(ErrArrayUserAlreadyDeleted) as raised:
        client.delete_user("array-user-1")
    assert raised.value.after_unanswered


@pytest.mark.parametrize("first", [_connect_error, _status(429)], ids=["a refused connection", "a 429"])
def test_a_404_after_a_request_array_never_applied_is_a_plain_404(
    first: Callable[[httpx.Request], httpx.Response],
) -> None:
    client, _ = _client(_first_then(first, 404))
    with pytest.raises(ErrArrayUserAlreadyDeleted) as raised:
        client.delete_user("array-user-1")
    assert not raised.value.after_unanswered


def test_a_call_that_gave_up_after_a_timeout_says_a_request_went_unanswered() -> None:
    client, _ = _client(_read_timeout, max_attempts=2)
    with pytest.raises(ArrayTransientError) as raised:
        client.delete_user("array-user-1")
    assert raised.value.unanswered


def test_a_call_that_gave_up_on_throttling_says_no_request_went_unanswered() -> None:
    client, _ = _client(_status(429), max_attempts=2)
    with pytest.raises(ArrayTransientError) as raised:
        client.delete_user("array-user-1")
    assert not raised.value.unanswered


def test_retries_stop_at_max_attempts_with_the_last_code() -> None:
    client, seen = _client(_status(503), max_attempts=4)
    with pytest.raises(ArrayTransientError) as raised:
        client.delete_user("array-user-1")
    assert len(seen) == 4
    assert raised.value.code == "503"
    assert raised.value.attempts == 4


def test_a_timeout_is_reported_with_the_code_timeout() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    client, _ = _client(slow, max_attempts=2)
    with pytest.raises(ArrayTransientError) as raised:
        client.delete_user("array-user-1")
    assert raised.value.code == "timeout"


def test_backoff_is_jittered_and_capped() -> None:
    time = FakeTime()
    client, _ = _client(_status(500), time=time, max_attempts=30, backoff_max=0.8)
    with pytest.raises(ArrayTransientError):
        client.delete_user("array-user-1")
    assert len(time.sleeps) == 29
    assert all(0 <= s <= 0.8 for s in time.sleeps)
    assert len(set(time.sleeps)) > 20  # random, not a fixed schedule


def test_a_numeric_retry_after_is_honoured_within_the_cap() -> None:
    time = FakeTime()
    answers = [httpx.Response(429, headers={"Retry-After": "0.7"}, json={}), httpx.Response(200, json={})]
    client, _ = _client(lambda request: answers.pop(0), time=time)
    client.delete_user("array-user-1")
    assert time.sleeps[0] >= 0.7


def test_no_attempt_starts_past_the_deadline() -> None:
    time = FakeTime()

    def slow_503(request: httpx.Request) -> httpx.Response:
        time.now += 0.4  # each call takes 0.4 s
        return httpx.Response(503, json={})

    client, seen = _client(slow_503, time=time, max_attempts=50)
    deadline = time.now + 2.0
    with pytest.raises(ArrayTransientError):
        client.delete_user("array-user-1", deadline=deadline)
    assert 1 <= len(seen) < 50
    # The last attempt started before the deadline, and no sleep crossed it.
    assert time.now - 0.4 < deadline


def test_a_deadline_already_passed_makes_no_call() -> None:
    time = FakeTime()
    client, seen = _client(_status(200), time=time)
    with pytest.raises(ArrayTransientError) as raised:
        client.delete_user("array-user-1", deadline=time.now - 1)
    assert seen == []
    assert raised.value.code == "budget"


def test_the_request_timeout_never_exceeds_the_time_left() -> None:
    time = FakeTime()
    client, seen = _client(_status(200), time=time)
    client.delete_user("array-user-1", deadline=time.now + 0.3)
    assert seen[0].extensions["timeout"]["read"] == pytest.approx(0.3)


def test_the_server_token_appears_in_no_log_error_or_repr(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    failures: list[BaseException] = []
    with FakeArrayServer(server_token=TOKEN, app_key=APP_KEY) as server:
        server.add_users(["array-user-1"])
        settings = ArraySettings(
            base_url=server.url, server_token=SecretStr(TOKEN), app_key=SecretStr(APP_KEY), max_attempts=2
        )
        with HttpArrayClient(settings, backoff_base_seconds=0.01, backoff_max_seconds=0.02) as client:
            server.set_faults(error_rate=1.0)
            with pytest.raises(ArrayTransientError) as transient:
                client.delete_user("array-user-1")
            failures.append(transient.value)
            server.clear_faults()
            server.expire_credentials()
            with pytest.raises(ArrayCredentialError) as credential:
                client.delete_user("array-user-1")
            failures.append(credential.value)
            texts = [caplog.text, repr(client), repr(settings), *(str(f) for f in failures)]
            texts += [repr(f) for f in failures]
    assert caplog.records  # the client and httpx did log
    assert all(TOKEN not in text and APP_KEY not in text for text in texts)
    assert all("array-user-1" not in text for text in texts[3:])


def test_against_the_fake_array_a_delete_then_a_repeat_answers_404(fake_array: FakeArrayServer) -> None:
    fake_array.add_users(["array-user-1"])
    with HttpArrayClient(ArraySettings(base_url=fake_array.url)) as client:
        client.delete_user("array-user-1")
        with pytest.raises(ErrArrayUserAlreadyDeleted):
            client.delete_user("array-user-1")
    assert [c.status for c in fake_array.calls()] == [200, 404]


def test_an_unreachable_array_is_logged_at_warning_with_its_code_and_no_user(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="adapters")
    client, _ = _client(_connect_error, max_attempts=2)
    with pytest.raises(ArrayTransientError):
        client.delete_user("array-user-canary")
    [gave_up] = [record for record in caplog.records if record.getMessage() == "array delete gave up"]
    assert (gave_up.levelno, gave_up.__dict__["code"], "array-user-canary" in caplog.text) == (
        logging.WARNING,
        "ConnectError",
        False,
    )


# -- create-user: not idempotent at Array, so never re-sent after it may have arrived --------------


def _accounts(handler: Callable[[httpx.Request], httpx.Response]) -> tuple[HttpArrayAccounts, list[str]]:
    seen: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return handler(request)

    settings = ArraySettings(
        base_url="http://127.0.0.1:9/", app_key=SecretStr(APP_KEY), server_token=SecretStr(TOKEN)
    )
    clock = FakeTime()
    accounts = HttpArrayAccounts(
        settings,
        ServiceSettings(),
        http=httpx.Client(transport=httpx.MockTransport(record)),
        retry=RetryPolicy(4, 0.1, 1.0, sleep=clock.sleep, monotonic=clock.monotonic),
    )
    return accounts, seen


def _created(request: httpx.Request) -> httpx.Response:
    return httpx.Response(201, json={"userId": "array-user-new"})


@pytest.mark.parametrize("first", [_read_timeout, _status(503)], ids=["a read timeout", "a 5xx"])
def test_a_create_user_that_may_have_reached_array_unanswered_is_sent_once_and_gives_up(
    first: Callable[[httpx.Request], httpx.Response],
) -> None:
    accounts, seen = _accounts(_first_then(first, 201))
    with pytest.raises(RetryableError):
        accounts.create_user("user-1")
    assert len(seen) == 1  # a second request could have made a second account


@pytest.mark.parametrize("first", [_connect_error, _status(429)], ids=["a refused connection", "a 429"])
def test_a_create_user_array_never_applied_is_retried(
    first: Callable[[httpx.Request], httpx.Response],
) -> None:
    calls = 0

    def answer(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return first(request) if calls == 1 else _created(request)

    accounts, seen = _accounts(answer)
    assert accounts.create_user("user-1") == "array-user-new"
    assert len(seen) == 2

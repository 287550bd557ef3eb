"""adapters/transactions.py: the primary-account call, its answers and refusals as the caller's errors."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from adapters import (
    DownstreamErrors,
    DownstreamNotFoundError,
    DownstreamRefusedError,
    DownstreamUnavailableError,
    HttpTransactions,
    RetryPolicy,
)
from config import ServiceSettings

TOKEN = "ptok-canary-secret"


def _client(
    handler: Callable[[httpx.Request], httpx.Response],
) -> tuple[HttpTransactions, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    retry = RetryPolicy(attempts=3, base_seconds=0.001, max_seconds=0.001, sleep=lambda _: None)
    client = HttpTransactions(
        ServiceSettings(transactions_base_url="http://127.0.0.1:9/"),
        http=httpx.Client(transport=httpx.MockTransport(record)),
        retry=retry,
    )
    return client, seen


def test_the_primary_account_is_read_from_the_users_path_with_its_token_kept_secret() -> None:
    client, seen = _client(
        lambda _: httpx.Response(200, json={"accountId": "acct-1", "processorToken": TOKEN})
    )
    account = client.primary_account("user/1")
    assert (seen[0].method, seen[0].url.raw_path) == ("GET", b"/users/user%2F1/primary-account")
    assert (account.account_id, account.processor_token.get_secret_value(), TOKEN in repr(account)) == (
        "acct-1",
        TOKEN,
        False,
    )


def test_a_404_is_not_found_no_primary_account() -> None:
    client, _ = _client(lambda _: httpx.Response(404, json={}))
    with pytest.raises(DownstreamNotFoundError) as raised:
        client.primary_account("u1")
    assert raised.value.code == "no_primary_account"


@pytest.mark.parametrize(
    ("status", "code"), [(401, "transactions_credentials"), (400, "transactions_refused")]
)
def test_a_refusal_is_terminal_with_its_code_and_never_retried(status: int, code: str) -> None:
    client, seen = _client(lambda _: httpx.Response(status, json={}))
    with pytest.raises(DownstreamRefusedError) as raised:
        client.primary_account("u1")
    assert (raised.value.code, len(seen)) == (code, 1)


def test_an_answer_without_a_token_is_a_bad_answer() -> None:
    client, _ = _client(lambda _: httpx.Response(200, json={"accountId": "acct-1"}))
    with pytest.raises(DownstreamRefusedError) as raised:
        client.primary_account("u1")
    assert raised.value.code == "transactions_bad_answer"


def test_5xx_past_every_attempt_is_unavailable_after_the_policys_attempts() -> None:
    client, seen = _client(lambda _: httpx.Response(503, json={}))
    with pytest.raises(DownstreamUnavailableError) as raised:
        client.primary_account("u1")
    assert (raised.value.code, len(seen)) == ("transactions_unavailable", 3)


def test_the_callers_errors_are_the_ones_raised() -> None:
    class Mine(Exception):
        pass

    def mine(message: str, code: str) -> Exception:
        return Mine(code)

    client, _ = _client(lambda _: httpx.Response(404, json={}))
    client.errors = DownstreamErrors(unavailable=mine, refused=mine, not_found=mine)  # type: ignore[arg-type]
    with pytest.raises(Mine):
        client.primary_account("u1")

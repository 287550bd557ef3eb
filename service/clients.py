"""The service's HTTP clients: Array's create-user and processor-token calls, and transactions-service's
primary account. The wire contract is `schema.array` (the fakes in `devstack/` serve the same one).

Each call gets a timeout and bounded retries with backoff on a transient failure (429, 5xx, a network
error); when they run out it raises `ServiceUnavailableError` (the route answers 503, the relinker lets
the job be redelivered). Any other refusal is `DownstreamRefusedError` (terminal), or, for "no such
thing" answers the service understands, a `WrongStateError`.

Secrets (the server token, the app key, a processor token) are read from their `SecretStr` only to build
a request; no error, log line or repr holds one, nor a user id or a body.
"""

from __future__ import annotations

__all__ = [
    "ArrayAccounts",
    "HttpArrayAccounts",
    "HttpTransactions",
    "PrimaryAccount",
    "Transactions",
    "default_http",
]

import logging
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from pydantic import SecretStr

from config import ArraySettings, ServiceSettings
from schema import array as wire
from schema.errors import RetryableError
from service._retry import RetryPolicy
from service.errors import DownstreamRefusedError, ServiceUnavailableError, WrongStateError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrimaryAccount:
    """The user's primary account at transactions-service, with the processor token for it."""

    account_id: str
    processor_token: SecretStr  # its repr is '**********'


class Transactions(Protocol):
    def primary_account(self, user_id: str) -> PrimaryAccount: ...


class ArrayAccounts(Protocol):
    def create_user(self, user_id: str) -> str:
        """The Array user id for this user: a new account, or the one the user already holds."""
        ...

    def post_processor_token(self, array_user_id: str, processor_token: SecretStr) -> None: ...


class _TransientError(RetryableError):
    def __init__(self, code: str) -> None:
        self.code = code
        super().__init__(f"transient: {code}")


def default_http(concurrency: int = 16) -> httpx.Client:
    """One pooled client for every concurrent request (loopback fakes, or the real services)."""
    size = max(concurrency * 2, 20)
    return httpx.Client(
        limits=httpx.Limits(max_connections=size, max_keepalive_connections=size), follow_redirects=False
    )


class _HttpCaller:
    def __init__(self, http: httpx.Client, timeout: float, retry: RetryPolicy, service: str) -> None:
        self._http = http
        self._timeout = timeout
        self._retry = retry
        self._service = service

    def call(
        self, method: str, url: str, *, headers: dict[str, str] | None = None, json: Any = None
    ) -> httpx.Response:
        """The response of the first attempt answered with a status that is not transient."""
        try:
            for attempt in self._retry.retrying():
                with attempt:
                    return self._once(method, url, headers, json)
        except _TransientError as failed:
            logger.info("downstream gave up", extra={"service": self._service, "code": failed.code})
            raise ServiceUnavailableError(
                f"{self._service} unavailable ({failed.code})", code=f"{self._service}_unavailable"
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, method: str, url: str, headers: dict[str, str] | None, json: Any) -> httpx.Response:
        try:
            response = self._http.request(
                method, url, headers=headers, json=json, timeout=httpx.Timeout(self._timeout)
            )
        except httpx.TimeoutException:
            raise _TransientError("timeout") from None
        except httpx.TransportError as failed:
            raise _TransientError(type(failed).__name__) from None
        if response.status_code == 429 or response.status_code >= 500:
            raise _TransientError(str(response.status_code))
        return response

    def refused(self, response: httpx.Response) -> DownstreamRefusedError:
        status = response.status_code
        code = f"{self._service}_credentials" if status in (401, 403) else f"{self._service}_refused"
        return DownstreamRefusedError(f"{self._service} refused the call (HTTP {status})", code=code)


def _text_field(response: httpx.Response, name: str) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    value = body.get(name) if isinstance(body, dict) else None
    return value if isinstance(value, str) and value else None


class HttpArrayAccounts:
    """`ArrayAccounts` over HTTP (`schema.array`). Thread-safe."""

    def __init__(
        self,
        settings: ArraySettings,
        service: ServiceSettings,
        *,
        http: httpx.Client | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._base = settings.base_url.rstrip("/")
        self._app_key = settings.app_key
        self._server_token = settings.server_token
        self._owns_http = http is None
        self._http = http or default_http(service.relinker_concurrency)
        self._caller = _HttpCaller(
            self._http, service.http_timeout_seconds, retry or RetryPolicy.from_settings(service), "array"
        )

    def __repr__(self) -> str:
        return f"HttpArrayAccounts(base={self._base!r})"

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def _headers(self) -> dict[str, str]:
        return {wire.SERVER_TOKEN_HEADER: self._server_token.get_secret_value()}

    def create_user(self, user_id: str) -> str:
        response = self._caller.call(
            wire.CREATE_USER_METHOD,
            self._base + wire.CREATE_USER_PATH,
            headers=self._headers(),
            json=wire.create_user_body(self._app_key.get_secret_value(), user_id),
        )
        if not response.is_success:
            raise self._caller.refused(response)
        array_user_id = _text_field(response, wire.USER_ID_FIELD)
        if array_user_id is None:
            raise DownstreamRefusedError(
                "array answered create-user without a user id", code="array_bad_answer"
            )
        return array_user_id

    def post_processor_token(self, array_user_id: str, processor_token: SecretStr) -> None:
        response = self._caller.call(
            wire.PROCESSOR_TOKEN_METHOD,
            self._base + wire.PROCESSOR_TOKEN_PATH,
            headers=self._headers(),
            json=wire.processor_token_body(
                self._app_key.get_secret_value(), array_user_id, processor_token.get_secret_value()
            ),
        )
        if response.status_code == 404:
            raise DownstreamRefusedError(
                "array does not know the account (HTTP 404)", code="array_user_unknown"
            )
        if not response.is_success:
            raise self._caller.refused(response)


class HttpTransactions:
    """`Transactions` over HTTP (`schema.array`'s primary-account call). Thread-safe."""

    def __init__(
        self, service: ServiceSettings, *, http: httpx.Client | None = None, retry: RetryPolicy | None = None
    ) -> None:
        self._base = service.transactions_base_url.rstrip("/")
        self._owns_http = http is None
        self._http = http or default_http(service.relinker_concurrency)
        self._caller = _HttpCaller(
            self._http,
            service.http_timeout_seconds,
            retry or RetryPolicy.from_settings(service),
            "transactions",
        )

    def __repr__(self) -> str:
        return f"HttpTransactions(base={self._base!r})"

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def primary_account(self, user_id: str) -> PrimaryAccount:
        response = self._caller.call(
            wire.PRIMARY_ACCOUNT_METHOD, self._base + wire.primary_account_path(user_id)
        )
        if response.status_code == 404:
            raise WrongStateError("the user has no primary account", code="no_primary_account")
        if not response.is_success:
            raise self._caller.refused(response)
        account_id = _text_field(response, wire.ACCOUNT_ID_FIELD)
        token = _text_field(response, wire.PROCESSOR_TOKEN_FIELD)
        if account_id is None or token is None:
            raise DownstreamRefusedError(
                "transactions answered without an account or token", code="transactions_bad_answer"
            )
        return PrimaryAccount(account_id=account_id, processor_token=SecretStr(token))

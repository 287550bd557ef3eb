"""Array's API: delete-user (the cleanup's and the erasure's call) and create-user and processor-token
(the service's calls), on one caller with one retry and one httpx mapping. The wire contract (paths,
headers, body fields) is `schema.array`, shared with the fake Array in `devstack/`.

delete-user (`HttpArrayClient`): 2xx deleted. 404 already gone (`ErrArrayUserAlreadyDeleted`, success;
`after_unanswered` when an earlier request of the call may have been the delete: a timeout, a connection
lost after connecting, a 5xx). 401/403 `ArrayCredentialError` (parks). 429, 5xx and network errors are
retried with full-jitter exponential backoff (honouring a numeric Retry-After) within both
`max_attempts` and the caller's deadline, then `ArrayTransientError`. Any other status
`ArrayRequestRejected` (terminal).

create-user and processor-token (`HttpArrayAccounts`): transient failures retried, then `unavailable`
(code `array_unavailable`); 401/403 `refused` (`array_credentials`), another refusal `refused`
(`array_refused`), a processor-token 404 `not_found` (`array_user_unknown`), an answer without a user
id `refused` (`array_bad_answer`): raised as the caller's `DownstreamErrors` say.

The server token and the app key are read from their `SecretStr` only to build a request; no error, log
line or repr holds one, nor a user id or a body.
"""

from __future__ import annotations

__all__ = ["ArrayAccounts", "ArrayClient", "HttpArrayAccounts", "HttpArrayClient"]

import logging
import time
from collections.abc import Callable
from typing import Protocol

import httpx
from pydantic import SecretStr

from adapters._caller import Caller, GaveUp, ServiceCalls, pooled_http, refusal_code, text_field
from adapters.errors import (
    ArrayCredentialError,
    ArrayRequestRejected,
    ArrayTransientError,
    DownstreamErrors,
    ErrArrayUserAlreadyDeleted,
)
from adapters.retry import RetryPolicy
from config import ArraySettings, ServiceSettings
from schema import array as wire

logger = logging.getLogger(__name__)


class ArrayClient(Protocol):
    def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
        """Delete one Array user. `deadline` is a `time.monotonic()` instant no retry may run past.

        Returns when Array confirms the delete. Raises `ErrArrayUserAlreadyDeleted` (404, success),
        `ArrayCredentialError` (401/403), `ArrayTransientError` (retries exhausted) or
        `ArrayRequestRejected` (any other refusal)."""
        ...


class ArrayAccounts(Protocol):
    def create_user(self, user_id: str) -> str:
        """The Array user id for this user: a new account, or the one the user already holds."""
        ...

    def post_processor_token(self, array_user_id: str, processor_token: SecretStr) -> None: ...


class HttpArrayClient:
    """`ArrayClient` over HTTP. Thread-safe: one instance serves every concurrent cleanup."""

    def __init__(
        self,
        settings: ArraySettings,
        *,
        http: httpx.Client | None = None,
        method_override: bool = False,
        backoff_base_seconds: float | None = None,
        backoff_max_seconds: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._url = settings.base_url.rstrip("/") + wire.DELETE_USER_PATH
        self._app_key = settings.app_key
        self._server_token = settings.server_token
        self._owns_http = http is None
        self._http = http or pooled_http(settings.concurrency)
        self._method_override = method_override
        policy = RetryPolicy.for_array_deletes(settings)
        retry = RetryPolicy(
            policy.attempts,
            policy.base_seconds if backoff_base_seconds is None else backoff_base_seconds,
            policy.max_seconds if backoff_max_seconds is None else backoff_max_seconds,
            sleep=sleep,
            monotonic=monotonic,
        )
        self._caller = Caller(self._http, timeout=settings.timeout_seconds, retry=retry)

    def __repr__(self) -> str:
        return f"HttpArrayClient(url={self._url!r})"

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> HttpArrayClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
        if not array_user_id:
            raise ValueError("an Array user id is required")
        headers = {wire.SERVER_TOKEN_HEADER: self._server_token.get_secret_value()}
        method = wire.DELETE_METHOD
        if self._method_override:
            headers[wire.METHOD_OVERRIDE_HEADER] = wire.DELETE_METHOD
            method = "POST"
        body = wire.delete_user_body(self._app_key.get_secret_value(), array_user_id)
        try:
            answer = self._caller.call(method, self._url, headers=headers, json=body, deadline=deadline)
        except GaveUp as failed:
            # Array unreachable or failing (network error, timeout, 429/5xx) past every retry: an
            # operator must see it (docs/operations/logs.md). Counts and codes only.
            logger.warning("array delete gave up", extra={"attempts": failed.attempts, "code": failed.code})
            raise ArrayTransientError(
                failed.code,
                retry_after=failed.retry_after,
                attempts=failed.attempts,
                unanswered=failed.unanswered,
            ) from None
        status = answer.response.status_code
        if 200 <= status < 300:
            return
        if status == 404:
            if answer.unanswered:
                raise ErrArrayUserAlreadyDeleted(
                    "the Array user is already deleted (HTTP 404, after an unanswered request)",
                    after_unanswered=True,
                )
            raise ErrArrayUserAlreadyDeleted("the Array user is already deleted (HTTP 404)")
        if status in (401, 403):
            raise ArrayCredentialError(status)
        raise ArrayRequestRejected(status)


class HttpArrayAccounts(ServiceCalls):
    """`ArrayAccounts` over HTTP. Thread-safe. Failures are raised as `errors` say (class attribute,
    or the `errors` argument)."""

    def __init__(
        self,
        settings: ArraySettings,
        service: ServiceSettings,
        *,
        http: httpx.Client | None = None,
        retry: RetryPolicy | None = None,
        errors: DownstreamErrors | None = None,
    ) -> None:
        super().__init__(settings.base_url, service, http=http, retry=retry, errors=errors)
        self._app_key = settings.app_key
        self._server_token = settings.server_token

    def create_user(self, user_id: str) -> str:
        # Not idempotent at Array (docs/local-stack.md): never re-sent after an attempt that may have
        # reached it, so one request creates at most one account.
        response = self._call(
            wire.CREATE_USER_METHOD,
            self._base + wire.CREATE_USER_PATH,
            wire.create_user_body(self._app_key.get_secret_value(), user_id),
            retry_unanswered=False,
        )
        if not response.is_success:
            raise self._refused(response.status_code)
        array_user_id = text_field(response, wire.USER_ID_FIELD)
        if array_user_id is None:
            raise self.errors.refused("array answered create-user without a user id", "array_bad_answer")
        return array_user_id

    def post_processor_token(self, array_user_id: str, processor_token: SecretStr) -> None:
        response = self._call(
            wire.PROCESSOR_TOKEN_METHOD,
            self._base + wire.PROCESSOR_TOKEN_PATH,
            wire.processor_token_body(
                self._app_key.get_secret_value(), array_user_id, processor_token.get_secret_value()
            ),
        )
        if response.status_code == 404:
            raise self.errors.not_found("array does not know the account (HTTP 404)", "array_user_unknown")
        if not response.is_success:
            raise self._refused(response.status_code)

    def _call(self, method: str, url: str, body: object, *, retry_unanswered: bool = True) -> httpx.Response:
        headers = {wire.SERVER_TOKEN_HEADER: self._server_token.get_secret_value()}
        try:
            return self._caller.call(
                method, url, headers=headers, json=body, retry_unanswered=retry_unanswered
            ).response
        except GaveUp as failed:
            logger.info("downstream gave up", extra={"service": "array", "code": failed.code})
            raise self.errors.unavailable(f"array unavailable ({failed.code})", "array_unavailable") from None

    def _refused(self, status: int) -> Exception:
        return self.errors.refused(f"array refused the call (HTTP {status})", refusal_code("array", status))

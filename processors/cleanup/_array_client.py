"""The Array API client: one call, delete-user, on httpx with tenacity retries.

The wire contract (path, headers, body fields) is `schema.array`, shared with the fake Array.

2xx: deleted. 404: already gone (`ErrArrayUserAlreadyDeleted`, success; `after_unanswered` when an
earlier request of the call may have been the delete: a timeout, a connection lost after connecting, a
5xx). 401/403: credentials
(`ArrayCredentialError`, parks). 429, 5xx and network errors: retried with full-jitter exponential backoff
(honouring a numeric Retry-After) within both `max_attempts` and the caller's deadline, then
`ArrayTransientError`. Any other status: `ArrayRequestRejected` (terminal).

The server token is read from its `SecretStr` only to build the request header; it is never logged, put
in an error or kept in a repr.
"""

from __future__ import annotations

__all__ = ["ArrayClient", "HttpArrayClient"]

import logging
import time
from collections.abc import Callable
from typing import Protocol

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_random_exponential

from config import ArraySettings
from processors.cleanup._errors import (
    ArrayCredentialError,
    ArrayRequestRejected,
    ArrayTransientError,
    ErrArrayUserAlreadyDeleted,
)
from schema import array as array_wire

logger = logging.getLogger(__name__)


# An attempt is not started with less time than this left before the deadline.
_MIN_ATTEMPT_SECONDS = 0.05


class ArrayClient(Protocol):
    def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
        """Delete one Array user. `deadline` is a `time.monotonic()` instant no retry may run past.

        Returns when Array confirms the delete. Raises `ErrArrayUserAlreadyDeleted` (404, success),
        `ArrayCredentialError` (401/403), `ArrayTransientError` (retries exhausted) or
        `ArrayRequestRejected` (any other refusal)."""
        ...


class HttpArrayClient:
    """`ArrayClient` over HTTP. Thread-safe: one instance serves every concurrent cleanup."""

    def __init__(
        self,
        settings: ArraySettings,
        *,
        http: httpx.Client | None = None,
        method_override: bool = False,
        backoff_base_seconds: float = 0.1,
        backoff_max_seconds: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._url = settings.base_url.rstrip("/") + array_wire.DELETE_USER_PATH
        self._app_key = settings.app_key
        self._server_token = settings.server_token
        self._timeout = settings.timeout_seconds
        self._max_attempts = settings.max_attempts
        self._owns_http = http is None
        self._http = http or httpx.Client(
            limits=httpx.Limits(
                max_connections=max(settings.concurrency * 2, 10),
                max_keepalive_connections=max(settings.concurrency * 2, 10),
            ),
            follow_redirects=False,
        )
        self._method_override = method_override
        self._backoff_max = backoff_max_seconds
        self._jitter = wait_random_exponential(multiplier=backoff_base_seconds, max=backoff_max_seconds)
        self._monotonic = monotonic
        self._sleep = sleep

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
        retrying = Retrying(
            retry=retry_if_exception_type(ArrayTransientError),
            wait=self._wait,
            stop=self._stopper(deadline),
            sleep=self._sleep,
            reraise=True,
        )
        attempts = 0
        unanswered = False  # an earlier request of this call may have been applied unseen
        try:
            for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    try:
                        self._attempt(array_user_id, deadline)
                    except ArrayTransientError as failed:
                        unanswered = unanswered or failed.unanswered
                        raise
        except ErrArrayUserAlreadyDeleted:
            if not unanswered:
                raise
            raise ErrArrayUserAlreadyDeleted(
                "the Array user is already deleted (HTTP 404, after an unanswered request)",
                after_unanswered=True,
            ) from None
        except ArrayTransientError as failed:
            # Array unreachable or failing (network error, timeout, 429/5xx) past every retry: an
            # operator must see it (docs/operations/logs.md). Counts and codes only.
            logger.warning("array delete gave up", extra={"attempts": attempts, "code": failed.code})
            raise ArrayTransientError(
                failed.code, retry_after=failed.retry_after, attempts=attempts, unanswered=unanswered
            ) from None

    def _wait(self, state: RetryCallState) -> float:
        jitter = float(self._jitter(state))
        failure = state.outcome.exception() if state.outcome is not None else None
        retry_after = failure.retry_after if isinstance(failure, ArrayTransientError) else None
        if retry_after is not None:
            return min(max(jitter, retry_after), self._backoff_max)
        return jitter

    def _stopper(self, deadline: float | None) -> Callable[[RetryCallState], bool]:
        def stop(state: RetryCallState) -> bool:
            if state.attempt_number >= self._max_attempts:
                return True
            if deadline is None:
                return False
            return self._monotonic() + state.upcoming_sleep + _MIN_ATTEMPT_SECONDS >= deadline

        return stop

    def _attempt(self, array_user_id: str, deadline: float | None) -> None:
        timeout = self._timeout
        if deadline is not None:
            remaining = deadline - self._monotonic()
            if remaining < _MIN_ATTEMPT_SECONDS:
                raise ArrayTransientError("budget")
            timeout = min(timeout, remaining)
        headers = {array_wire.SERVER_TOKEN_HEADER: self._server_token.get_secret_value()}
        method = array_wire.DELETE_METHOD
        if self._method_override:
            headers[array_wire.METHOD_OVERRIDE_HEADER] = array_wire.DELETE_METHOD
            method = "POST"
        body = array_wire.delete_user_body(self._app_key.get_secret_value(), array_user_id)
        try:
            response = self._http.request(
                method, self._url, json=body, headers=headers, timeout=httpx.Timeout(timeout)
            )
        except httpx.ConnectTimeout:
            raise ArrayTransientError("timeout") from None  # never connected: nothing was sent
        except httpx.TimeoutException:
            raise ArrayTransientError("timeout", unanswered=True) from None
        except httpx.ConnectError as failed:
            raise ArrayTransientError(type(failed).__name__) from None
        except httpx.TransportError as failed:  # lost after connecting: the request may have arrived
            raise ArrayTransientError(type(failed).__name__, unanswered=True) from None
        _raise_for_status(response)


def _raise_for_status(response: httpx.Response) -> None:
    status = response.status_code
    if 200 <= status < 300:
        return
    if status == 404:
        raise ErrArrayUserAlreadyDeleted("the Array user is already deleted (HTTP 404)")
    if status in (401, 403):
        raise ArrayCredentialError(status)
    if status == 429:
        raise ArrayTransientError(str(status), retry_after=_retry_after(response))
    if status >= 500:  # the server may have applied the delete before failing
        raise ArrayTransientError(str(status), retry_after=_retry_after(response), unanswered=True)
    raise ArrayRequestRejected(status)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get(array_wire.RETRY_AFTER_HEADER)
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
    return seconds if seconds >= 0 else None

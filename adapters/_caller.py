"""One HTTP call with its timeout, bounded retries and the one httpx mapping (`adapters.errors`)."""

from __future__ import annotations

__all__ = ["Answer", "Caller", "GaveUp", "ServiceCalls", "pooled_http", "refusal_code", "text_field"]

from dataclasses import dataclass
from typing import Any

import httpx

from adapters.errors import DownstreamErrors, TransientCall, transient_from_status, transient_from_transport
from adapters.retry import MIN_ATTEMPT_SECONDS, RetryPolicy
from config import ServiceSettings


def pooled_http(concurrency: int) -> httpx.Client:
    """One pooled client for every concurrent call (loopback fakes, or the real services)."""
    size = max(concurrency * 2, 20)
    return httpx.Client(
        limits=httpx.Limits(max_connections=size, max_keepalive_connections=size), follow_redirects=False
    )


@dataclass(frozen=True)
class Answer:
    """The first response with a status that is not transient, and how the call got it."""

    response: httpx.Response
    attempts: int
    unanswered: bool  # an earlier request of this call may have been applied unseen


class GaveUp(TransientCall):
    """Every attempt the policy allowed failed transiently (the last failure's code)."""

    def __init__(self, last: TransientCall, *, attempts: int, unanswered: bool) -> None:
        super().__init__(last.code, retry_after=last.retry_after, unanswered=unanswered)
        self.attempts = attempts


class Caller:
    """Makes one call: `call` returns an `Answer` or raises `GaveUp`. Thread-safe."""

    def __init__(self, http: httpx.Client, *, timeout: float, retry: RetryPolicy) -> None:
        self._http = http
        self._timeout = timeout
        self._retry = retry

    def call(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        json: Any = None,
        deadline: float | None = None,
        retry_unanswered: bool = True,
    ) -> Answer:
        """`retry_unanswered=False` for a call that is not idempotent (create-user): once an attempt may
        have reached the server unanswered, no further attempt is made, so the call has at most one
        effect there; it gives up with `unanswered` set."""
        attempts = 0
        unanswered = False
        stopped: TransientCall | None = None
        try:
            for attempt in self._retry.retrying(retry_on=TransientCall, deadline=deadline):
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    try:
                        response = self._once(method, url, headers, json, deadline)
                    except TransientCall as failed:
                        unanswered = unanswered or failed.unanswered
                        if not (failed.unanswered and not retry_unanswered):
                            raise
                        stopped = failed  # leaves the retry loop: a second attempt could be a second effect
                    else:
                        return Answer(response, attempts, unanswered)
                if stopped is not None:
                    break
        except TransientCall as failed:
            raise GaveUp(failed, attempts=attempts, unanswered=unanswered) from None
        if stopped is not None:
            raise GaveUp(stopped, attempts=attempts, unanswered=True)
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(
        self, method: str, url: str, headers: dict[str, str] | None, json: Any, deadline: float | None
    ) -> httpx.Response:
        timeout = self._timeout
        if deadline is not None:
            remaining = deadline - self._retry.monotonic()
            if remaining < MIN_ATTEMPT_SECONDS:
                raise TransientCall("budget")
            timeout = min(timeout, remaining)
        try:
            response = self._http.request(
                method, url, headers=headers, json=json, timeout=httpx.Timeout(timeout)
            )
        except httpx.TransportError as failed:
            raise transient_from_transport(failed) from None
        transient = transient_from_status(response)
        if transient is not None:
            raise transient
        return response


class ServiceCalls:
    """What the service's downstream clients (Array's accounts, transactions-service) share: a base URL,
    a pooled httpx client (closed by `close` only when made here), one `Caller` on the service's timeout
    and retry policy, and how failures are raised (`errors`: the class attribute, or the argument)."""

    errors = DownstreamErrors()

    def __init__(
        self,
        base_url: str,
        service: ServiceSettings,
        *,
        http: httpx.Client | None = None,
        retry: RetryPolicy | None = None,
        errors: DownstreamErrors | None = None,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._owns_http = http is None
        self._http = http or pooled_http(service.relinker_concurrency)
        self._caller = Caller(
            self._http,
            timeout=service.http_timeout_seconds,
            retry=retry or RetryPolicy.from_settings(service),
        )
        if errors is not None:
            self.errors = errors

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base={self._base!r})"

    def close(self) -> None:
        if self._owns_http:
            self._http.close()


def text_field(response: httpx.Response, name: str) -> str | None:
    """A non-empty string field of a JSON object answer, or None."""
    try:
        body = response.json()
    except ValueError:
        return None
    value = body.get(name) if isinstance(body, dict) else None
    return value if isinstance(value, str) and value else None


def refusal_code(service: str, status: int) -> str:
    return f"{service}_credentials" if status in (401, 403) else f"{service}_refused"

"""The HTTP edge's errors, and the one place httpx's failures and HTTP statuses are read.

Every downstream call (Array's delete-user, create-user and processor-token calls; transactions-service's
primary account) is made through `adapters._caller`, which turns a network fault, a timeout, 429 or a
5xx into `TransientCall` (retried by `adapters.retry`) and hands every other answer back to the client
that made the call, which names what it means for that call:

    EntitlementsError ── ErrArrayUserAlreadyDeleted            delete-user 404 (success for cleanup)
    RetryableError ─┬─── ArrayCredentialError                  delete-user 401/403 (cleanup parks)
                    ├─── ArrayTransientError                   delete-user: retries or budget ran out
                    └─── DownstreamUnavailableError            a service call: retries ran out
    TerminalError ──┬─── ArrayRequestRejected                  delete-user: any other refusal
                    └─── DownstreamRefusedError ── DownstreamNotFoundError    a service call refused

No message holds a body, a user id, an account id, a token or an address: statuses and codes only.
"""

from __future__ import annotations

__all__ = [
    "ArrayCredentialError",
    "ArrayRequestRejected",
    "ArrayTransientError",
    "DownstreamErrors",
    "DownstreamNotFoundError",
    "DownstreamRefusedError",
    "DownstreamUnavailableError",
    "ErrArrayUserAlreadyDeleted",
    "TransientCall",
    "transient_from_status",
    "transient_from_transport",
]

from collections.abc import Callable
from dataclasses import dataclass

import httpx

from schema import array as wire
from schema.errors import EntitlementsError, RecordContext, RetryableError, TerminalError


class ErrArrayUserAlreadyDeleted(EntitlementsError):
    """Array answered 404 to a delete: the account is already gone, which is what cleanup wanted.

    Not a failure: callers count it as success (the service design's "Array Account Cleanup",
    docs/operations/cleanup.md).

    `after_unanswered` is True when an earlier request of the same call went unanswered (a timeout, a
    connection lost after sending, a 5xx): that request may have been the delete, so this 404 may be it."""

    code = "404"

    def __init__(
        self, message: str, *, after_unanswered: bool = False, context: RecordContext | None = None
    ) -> None:
        self.after_unanswered = after_unanswered
        super().__init__(message, context=context)


class ArrayCredentialError(RetryableError):
    """Array refused our credentials (401/403): not the account's fault, so the cleanup is parked."""

    def __init__(self, status: int, *, context: RecordContext | None = None) -> None:
        self.status = status
        self.code = str(status)
        super().__init__(f"Array refused the credentials (HTTP {status})", context=context)


class ArrayRequestRejected(TerminalError):
    """Array refused the request itself (a 4xx other than 401/403/404): retrying cannot help."""

    def __init__(self, status: int, *, context: RecordContext | None = None) -> None:
        self.status = status
        self.code = str(status)
        super().__init__(f"Array rejected the delete (HTTP {status})", context=context)


class ArrayTransientError(RetryableError):
    """429, 5xx or a network fault that outlasted the retries or the time budget.

    `unanswered` is True when a request may have reached Array without its answer reaching us (a
    timeout or a connection lost after connecting, a 5xx): the delete may have been applied."""

    def __init__(
        self,
        code: str,
        *,
        retry_after: float | None = None,
        attempts: int = 1,
        unanswered: bool = False,
        context: RecordContext | None = None,
    ) -> None:
        self.code = code
        self.retry_after = retry_after
        self.attempts = attempts
        self.unanswered = unanswered
        super().__init__(f"Array delete failed transiently ({code}, {attempts} attempt(s))", context=context)


class DownstreamUnavailableError(RetryableError):
    """A call to Array or transactions-service kept failing transiently through its bounded retries
    (`code` is `<service>_unavailable`): safe to retry later."""

    status = 503

    def __init__(self, message: str, *, code: str) -> None:
        self.code = code
        super().__init__(message)


class DownstreamRefusedError(TerminalError):
    """Array or transactions-service refused the call (a 4xx other than throttling, or an answer
    without what the call returns): not retried."""

    status = 502

    def __init__(self, message: str, *, code: str) -> None:
        self.code = code
        super().__init__(message)


class DownstreamNotFoundError(DownstreamRefusedError):
    """The downstream service does not know the thing the call names (its 404): `code` says which."""


def _unavailable(message: str, code: str) -> EntitlementsError:
    return DownstreamUnavailableError(message, code=code)


def _refused(message: str, code: str) -> EntitlementsError:
    return DownstreamRefusedError(message, code=code)


def _not_found(message: str, code: str) -> EntitlementsError:
    return DownstreamNotFoundError(message, code=code)


@dataclass(frozen=True)
class DownstreamErrors:
    """How a caller wants the service calls' failures raised: the adapters' own classes by default;
    the entitlements service passes its own refusals (`service.clients`), so that its routes answer
    them as they answer every other refusal. Each takes (message, code)."""

    unavailable: Callable[[str, str], EntitlementsError] = _unavailable
    refused: Callable[[str, str], EntitlementsError] = _refused
    not_found: Callable[[str, str], EntitlementsError] = _not_found


class TransientCall(RetryableError):
    """One attempt failed in a way another attempt may not (the retry policy retries only this).

    `unanswered` when the request may have reached the server without its answer reaching us: a
    timeout or a connection lost after connecting, or a 5xx (the server may have applied it first)."""

    def __init__(self, code: str, *, retry_after: float | None = None, unanswered: bool = False) -> None:
        self.code = code
        self.retry_after = retry_after
        self.unanswered = unanswered
        super().__init__(f"transient: {code}")


def transient_from_transport(failed: httpx.TransportError) -> TransientCall:
    """httpx's network faults, read once."""
    if isinstance(failed, httpx.ConnectTimeout):
        return TransientCall("timeout")  # never connected: nothing was sent
    if isinstance(failed, httpx.TimeoutException):
        return TransientCall("timeout", unanswered=True)
    if isinstance(failed, httpx.ConnectError):
        return TransientCall(type(failed).__name__)
    # Lost after connecting: the request may have arrived.
    return TransientCall(type(failed).__name__, unanswered=True)


def transient_from_status(response: httpx.Response) -> TransientCall | None:
    """429 and 5xx, read once (None for any other status: the calling client names what it means)."""
    status = response.status_code
    if status == 429:
        return TransientCall(str(status), retry_after=_retry_after(response))
    if status >= 500:  # the server may have applied the request before failing
        return TransientCall(str(status), retry_after=_retry_after(response), unanswered=True)
    return None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get(wire.RETRY_AFTER_HEADER)
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
    return seconds if seconds >= 0 else None

"""The service's refusals and failures, in the project's one exception tree (`schema.errors`).

Each refusal carries the HTTP status and the short machine code the routes answer with; its message is
words only (never a user id, an account id, a token or a body), so it may be logged and returned.

    TerminalError ── ServiceRefusal ─┬─ UnknownUserError            404 unknown_user
                                     ├─ EntitlementNotActiveError   404 entitlement_not_active
                                     ├─ WrongStateError             409 <the state rule>
                                     │   └─ ConcurrentRequestError  409 concurrent_request
                                     ├─ IdempotencyKeyReusedError   422 idempotency_key_reused
                                     └─ DownstreamRefusal           502 <service>_<status>
    RetryableError ── ServiceUnavailableError                       503 <what> (safe to retry)

`DownstreamRefusal` is also the HTTP edge's `adapters.DownstreamRefusedError` (one class for a refused
downstream call): `service.clients` raises it in that one's place, so the routes answer it as a refusal.
"""

from __future__ import annotations

__all__ = [
    "ConcurrentRequestError",
    "DownstreamRefusal",
    "EntitlementNotActiveError",
    "ErrEntitlementNotActive",
    "IdempotencyKeyReusedError",
    "ServiceRefusal",
    "ServiceUnavailableError",
    "UnknownUserError",
    "WrongStateError",
]

from adapters import DownstreamRefusedError
from schema.errors import RetryableError, TerminalError


class ServiceRefusal(TerminalError):
    """A request the service refuses: retrying it unchanged cannot help."""

    status = 400
    code = "refused"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message)


class UnknownUserError(ServiceRefusal):
    """The user has no entitlement row at all."""

    status = 404
    code = "unknown_user"


class EntitlementNotActiveError(ServiceRefusal):
    """arraylink.ErrEntitlementNotActive: the row a link read is gone or no longer Active (SaveIfActive
    refused the write), or the user holds no Active row. Terminal on both paths: the endpoint answers
    404, the relinker records it and never retries."""

    status = 404
    code = "entitlement_not_active"

    def __init__(self, message: str, *, reason: str = "no_active_row") -> None:
        self.reason = reason  # "no_active_row" (at the read) or "save_refused" (SaveIfActive's condition)
        self.array_account_id: str | None = None  # the account of the row read, when there was one
        super().__init__(message)


ErrEntitlementNotActive = EntitlementNotActiveError


class WrongStateError(ServiceRefusal):
    """The user's rows are not in the state the operation moves them from (`code` names the rule)."""

    status = 409
    code = "wrong_state"


class ConcurrentRequestError(WrongStateError):
    """Another request for the same user changed its rows between this request's read and its write
    (the user's guard refused the transaction): nothing of this request is in effect, except an account
    Array created for it, scheduled on its stale key. Read the user's state and retry if still needed."""

    code = "concurrent_request"


class IdempotencyKeyReusedError(ServiceRefusal):
    """An Idempotency-Key the user sent before with another request (another route): refused, nothing
    done. A key names one request; a new request takes a new key."""

    status = 422
    code = "idempotency_key_reused"


class DownstreamRefusal(DownstreamRefusedError, ServiceRefusal):
    """Array or transactions-service refused the call (a 4xx other than throttling): not retried. The
    edge's class first, so its `__init__` (message, code) runs and hands the message on to the refusal's."""

    status = 502
    code = "downstream_refused"


class ServiceUnavailableError(RetryableError):
    """A downstream call (Array, transactions-service, DynamoDB) kept failing transiently through its
    bounded retries. The route answers 503; the request is safe to retry."""

    status = 503

    def __init__(self, message: str, *, code: str) -> None:
        self.code = code
        super().__init__(message)

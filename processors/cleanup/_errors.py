"""The cleanup processor's errors. Each carries a short machine `code` (an HTTP status, an error class
name) that outcomes record; none holds a body, a key, a user id, an address or a token."""

from __future__ import annotations

__all__ = [
    "ArrayCredentialError",
    "ArrayRequestRejected",
    "ArrayTransientError",
    "ErrArrayUserAlreadyDeleted",
    "GuardUnavailableError",
    "RetryQueueError",
]

from schema.errors import EntitlementsError, FlushIncomplete, RecordContext, RetryableError, TerminalError


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


class GuardUnavailableError(RetryableError):
    """GSI1 could not be read, so the in-use guard cannot decide: fail closed (park, never delete)."""

    def __init__(self, code: str, *, context: RecordContext | None = None) -> None:
        self.code = code
        super().__init__(f"the in-use guard could not read GSI1 ({code})", context=context)


class RetryQueueError(FlushIncomplete):
    """A cleanup could not be parked in the retry queue; the stream must redeliver it.

    `park_now` when the queue did not answer within the flush's budget: a retry would hold the shard a
    budget again, so the consumer parks the records locally at once. `finished` names the events whose
    work ended in this flush or an earlier one since the last success (see `FlushIncomplete`): only the
    others are parked."""

    def __init__(
        self,
        code: str,
        *,
        park_now: bool = False,
        finished: frozenset[tuple[str, str]] = frozenset(),
        context: RecordContext | None = None,
    ) -> None:
        self.code = code
        super().__init__(
            f"could not park cleanup work ({code})", finished=finished, context=context, park_now=park_now
        )

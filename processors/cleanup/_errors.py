"""The cleanup processor's own errors (Array's answers to a delete are `adapters.errors`'). Each carries a
short machine `code` (an error class name) that outcomes record; none holds a body, a key, a user id, an
address or a token."""

from __future__ import annotations

__all__ = [
    "GuardUnavailableError",
    "RetryQueueError",
]

from schema.errors import FlushIncomplete, RecordContext, RetryableError


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

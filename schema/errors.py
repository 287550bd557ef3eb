"""The project's one exception tree.

Every error the project raises on purpose derives from `EntitlementsError`. Retryable and terminal
failures are different types so callers decide by type, never by message. Errors carry the stream
position they concern (shard, sequence number, event id) where there is one; never a body or a key.
"""

from __future__ import annotations

__all__ = [
    "DemoError",
    "EntitlementsError",
    "FlushIncomplete",
    "RecordContext",
    "RecordRejected",
    "RetryableError",
    "TerminalError",
]

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RecordContext:
    """Where in the stream an error happened. Holds positions only, no personal data."""

    shard_id: str | None = None
    sequence_number: str | None = None
    event_id: str | None = None

    def __str__(self) -> str:
        parts = [
            f"{name}={value}"
            for name, value in (
                ("shard", self.shard_id),
                ("seq", self.sequence_number),
                ("event", self.event_id),
            )
            if value
        ]
        return " ".join(parts)


class EntitlementsError(Exception):
    """Root of every error this project raises on purpose."""

    def __init__(self, message: str, *, context: RecordContext | None = None) -> None:
        self.context = context or RecordContext()
        suffix = f" [{self.context}]" if str(self.context) else ""
        super().__init__(f"{message}{suffix}")


class RetryableError(EntitlementsError):
    """The same call may succeed later (throttling, a 5xx, a network fault).

    `park_now` is the raiser's hint that retrying at once cannot help (the dependency did not answer
    within its budget: a retry would hold the caller as long again): the caller keeps the work for
    later (the consumer parks it) without retrying now. False unless the raiser says so."""

    park_now: bool = False

    def __init__(self, message: str, *, context: RecordContext | None = None, park_now: bool = False) -> None:
        self.park_now = park_now
        super().__init__(message, context=context)


class FlushIncomplete(RetryableError):
    """A handler's flush failed after finishing part of what it was given: Lambda's partial batch
    response, the other way round (it lists what finished, so anything it forgets is retried, never lost).

    `finished` holds the (shard id, sequence number) of every event given to the handler since its last
    successful flush whose work ended (its outcome recorded, or handed to another durable owner); the
    consumer parks only the others. A flush that raises anything else has finished nothing."""

    def __init__(
        self,
        message: str,
        *,
        finished: frozenset[tuple[str, str]] = frozenset(),
        context: RecordContext | None = None,
        park_now: bool = False,
    ) -> None:
        self.finished = finished
        super().__init__(message, context=context, park_now=park_now)


class TerminalError(EntitlementsError):
    """Retrying cannot help (bad input, a refused precondition, a 4xx)."""


class RecordRejected(TerminalError):
    """One record's own content breaks a handler's rule (an expiry naming no account, say).

    Raised by a handler's `add(event)`. The consumer dead-letters that record for that handler alone
    (raw bytes, handler, reason) and every other record and handler carries on; the shard checkpoints
    past it. The message says which rule, in words only: never a key, an id or a value.
    """


class DemoError(TerminalError):
    """`entitlements demo` could not run or finish: a state folder holding what it did not make, or a
    step that did not end in time. Names the folder or the step, never a record's value."""

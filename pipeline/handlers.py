"""The contract between the record processor and whatever consumes its events (the lake, processors).

A handler is given events with `add` and makes them durable with `flush`. The processor checkpoints a
shard only after every registered handler has flushed every event before the checkpoint, so anything a
handler has not made durable is redelivered after a crash. Handlers therefore see events at least once
and must be idempotent (key side effects by the event's identity or make them naturally repeatable).

`flush` raises `RetryableError` for a failure worth retrying; anything else is treated as terminal.
When a handler still cannot flush, the consumer parks the raw records it was given (pipeline.parking)
and calls `discard_pending`, so one failing handler neither loses work nor stalls the shard.
"""

from __future__ import annotations

__all__ = ["Handler", "HandlerRegistry"]

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from pipeline.events import StreamEvent


@runtime_checkable
class Handler(Protocol):
    @property
    def name(self) -> str:
        """A short, stable name used in logs, metrics and parked-work files."""
        ...

    def add(self, event: StreamEvent) -> None:
        """Take one event. Cheap: buffer it; do the work in `flush`."""
        ...

    def flush(self) -> None:
        """Make everything added so far durable. Return only when it is."""
        ...

    def discard_pending(self) -> None:
        """Forget what was added since the last successful flush: the consumer has parked it durably
        (as raw records) after the handler failed to flush, and will replay it through the same path."""
        ...


class HandlerRegistry:
    """Handlers in the order they are flushed. Entry points register; the consumer only iterates."""

    def __init__(self) -> None:
        self._handlers: list[Handler] = []

    def register(self, handler: Handler) -> Handler:
        if any(existing.name == handler.name for existing in self._handlers):
            raise ValueError(f"a handler named {handler.name!r} is already registered")
        self._handlers.append(handler)
        return handler

    def __iter__(self) -> Iterator[Handler]:
        return iter(tuple(self._handlers))

    def __len__(self) -> int:
        return len(self._handlers)

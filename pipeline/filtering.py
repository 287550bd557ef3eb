"""A handler wrapper that drops the events (and processor outcomes) of users a predicate names.

The KCL child wraps the lake in it with the erasure ledger's predicate, so events of an erased account
that are still in the stream, or replayed, never land again.
"""

from __future__ import annotations

__all__ = ["DroppingUsers", "LandingHandler"]

from collections.abc import Callable
from typing import Protocol

from pipeline.events import StreamEvent
from pipeline.handlers import Handler
from schema.outcomes import OutcomeEvent, OutcomeSink


class LandingHandler(Handler, OutcomeSink, Protocol):
    """A handler that also takes processor outcomes (the lake)."""


class DroppingUsers:
    def __init__(self, inner: LandingHandler, drop: Callable[[str | None], bool]) -> None:
        self._inner = inner
        self._drop = drop
        self.dropped_events = 0
        self.dropped_outcomes = 0

    @property
    def name(self) -> str:
        return self._inner.name

    def add(self, event: StreamEvent) -> None:
        if self._drop(event.user_id):
            self.dropped_events += 1
            return
        self._inner.add(event)

    def add_outcome(self, outcome: OutcomeEvent) -> None:
        if self._drop(outcome.user_id):
            self.dropped_outcomes += 1
            return
        self._inner.add_outcome(outcome)

    def flush(self) -> None:
        self._inner.flush()

    def discard_pending(self) -> None:
        self._inner.discard_pending()

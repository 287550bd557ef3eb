"""A handler wrapper that drops the events (and processor outcomes) a predicate names, by user and time.

The KCL child wraps the lake in it with the erasure ledger's predicate (`drop(user_id, at)`), so an
erased account's events that are still in the stream, or replayed, never land again, while the same
user's events after the erasure completed (a new signup is new data) land as anyone's. Each event is
judged at its own time: a stream event at its ApproximateCreationDateTime (`created_at`), an outcome at
its `occurred_at`.
"""

from __future__ import annotations

__all__ = ["DropPredicate", "DroppingUsers", "LandingHandler"]

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from pipeline.events import StreamEvent
from pipeline.handlers import Handler
from schema.outcomes import OutcomeEvent, OutcomeSink

# (user id, the event's own time) -> drop it. A None user id is nobody's.
DropPredicate = Callable[[str | None, datetime | None], bool]


class LandingHandler(Handler, OutcomeSink, Protocol):
    """A handler that also takes processor outcomes (the lake)."""


class DroppingUsers:
    def __init__(self, inner: LandingHandler, drop: DropPredicate) -> None:
        self._inner = inner
        self._drop = drop
        self.dropped_events = 0
        self.dropped_outcomes = 0

    @property
    def name(self) -> str:
        return self._inner.name

    def add(self, event: StreamEvent) -> None:
        if self._drop(event.user_id, event.created_at):
            self.dropped_events += 1
            return
        self._inner.add(event)

    def add_outcome(self, outcome: OutcomeEvent) -> None:
        if self._drop(outcome.user_id, outcome.occurred_at):
            self.dropped_outcomes += 1
            return
        self._inner.add_outcome(outcome)

    def flush(self) -> None:
        self._inner.flush()

    def discard_pending(self) -> None:
        self._inner.discard_pending()

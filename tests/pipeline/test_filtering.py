"""Dropping the events and outcomes of named users before they land."""

from __future__ import annotations

from datetime import UTC, datetime

from pipeline.events import ChangeKind, StreamEvent, StreamPosition, UnknownItemChanged
from pipeline.filtering import DroppingUsers
from schema.outcomes import OutcomeEvent, OutcomeKind
from schema.table import ItemKind


class Sink:
    name = "lake"

    def __init__(self) -> None:
        self.events: list[str] = []
        self.outcomes: list[str] = []
        self.flushes = 0

    def add(self, event: StreamEvent) -> None:
        self.events.append(event.event_id)

    def add_outcome(self, outcome: OutcomeEvent) -> None:
        self.outcomes.append(outcome.outcome_id)

    def flush(self) -> None:
        self.flushes += 1

    def discard_pending(self) -> None:
        self.events.clear()


def event(event_id: str, user: str | None) -> StreamEvent:
    return UnknownItemChanged(
        event_id=event_id,
        change=ChangeKind.MODIFY,
        position=StreamPosition(stream_arn="arn", shard_id="s", sequence_number="1"),
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        keys={},
        item_kind=ItemKind.UNKNOWN,
        user_id=user,
    )


def outcome(outcome_id: str, user: str | None) -> OutcomeEvent:
    return OutcomeEvent(
        outcome_id=outcome_id,
        kind=OutcomeKind.CLEANUP_DELETED,
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        user_id=user,
        array_account_id="a",
    )


def test_events_and_outcomes_of_dropped_users_never_reach_the_sink() -> None:
    sink = Sink()
    landing = DroppingUsers(sink, lambda user: user == "erased")
    landing.add(event("e1", "erased"))
    landing.add(event("e2", "kept"))
    landing.add(event("e3", None))
    landing.add_outcome(outcome("o1", "erased"))
    landing.add_outcome(outcome("o2", "kept"))
    assert sink.events == ["e2", "e3"]
    assert sink.outcomes == ["o2"]
    assert (landing.dropped_events, landing.dropped_outcomes) == (1, 1)


def test_flush_and_name_are_the_sinks() -> None:
    sink = Sink()
    landing = DroppingUsers(sink, lambda user: False)
    landing.flush()
    assert sink.flushes == 1
    assert landing.name == "lake"

"""Dropping the events and outcomes of named users before they land."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

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


JANUARY = datetime(2026, 1, 1, tzinfo=UTC)


def event(event_id: str, user: str | None, at: datetime = JANUARY) -> StreamEvent:
    return UnknownItemChanged(
        event_id=event_id,
        change=ChangeKind.MODIFY,
        position=StreamPosition(stream_arn="arn", shard_id="s", sequence_number="1"),
        created_at=at,
        keys={},
        item_kind=ItemKind.UNKNOWN,
        user_id=user,
    )


def outcome(outcome_id: str, user: str | None, at: datetime = JANUARY) -> OutcomeEvent:
    return OutcomeEvent(
        outcome_id=outcome_id,
        kind=OutcomeKind.CLEANUP_DELETED,
        occurred_at=at,
        user_id=user,
        array_account_id="a",
    )


def test_events_and_outcomes_of_dropped_users_never_reach_the_sink() -> None:
    sink = Sink()
    landing = DroppingUsers(sink, lambda user, at: user == "erased")
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
    landing = DroppingUsers(sink, lambda user, at: False)
    landing.flush()
    assert sink.flushes == 1
    assert landing.name == "lake"


def test_each_event_and_outcome_is_judged_at_its_own_time() -> None:
    sink = Sink()
    completed = JANUARY + timedelta(days=1)
    landing = DroppingUsers(sink, lambda user, at: user == "back" and at is not None and at <= completed)
    landing.add(event("before", "back", JANUARY))
    landing.add(event("after", "back", completed + timedelta(seconds=1)))
    landing.add_outcome(outcome("o-before", "back", JANUARY))
    landing.add_outcome(outcome("o-after", "back", completed + timedelta(hours=1)))
    assert sink.events == ["after"]
    assert sink.outcomes == ["o-after"]

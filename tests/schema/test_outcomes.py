"""schema/outcomes.py: the identity of an outcome, and which of two with one identity is kept."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schema.outcomes import (
    FINAL_CLEANUP_OUTCOMES,
    FINAL_OUTCOME_PRECEDENCE,
    OutcomeEvent,
    OutcomeKind,
    outcome_id,
    preferred_outcome,
)

K = OutcomeKind


def _outcome(kind: OutcomeKind, attempt: int = 0) -> OutcomeEvent:
    return OutcomeEvent(
        outcome_id=outcome_id("event-1", kind, attempt),
        kind=kind,
        occurred_at=datetime(2026, 3, 1, tzinfo=UTC),
        user_id="u1",
        array_account_id="acct-1",
        source_event_id="event-1",
        attempt=attempt,
    )


def test_the_final_outcomes_of_one_expiry_share_one_identity_whatever_their_kind_and_attempt() -> None:
    ids = {outcome_id("event-1", kind, attempt) for kind in FINAL_CLEANUP_OUTCOMES for attempt in (0, 1, 7)}
    assert len(ids) == 1
    assert outcome_id("event-2", K.CLEANUP_DELETED) not in ids


def test_a_step_is_identified_by_its_kind_and_attempt() -> None:
    steps = [K.CLEANUP_PARKED, K.CLEANUP_RETRIED, K.CLEANUP_ROW_MARKED, K.CLEANUP_MARK_FAILED]
    ids = {outcome_id("event-1", kind, attempt) for kind in steps for attempt in (0, 1)}
    assert len(ids) == len(steps) * 2
    assert outcome_id("event-1", K.CLEANUP_DELETED) not in ids


def test_the_precedence_is_deleted_then_already_deleted_then_refused_then_failed() -> None:
    assert FINAL_OUTCOME_PRECEDENCE == (
        K.CLEANUP_DELETED,
        K.CLEANUP_ALREADY_DELETED,
        K.CLEANUP_REFUSED_BY_GUARD,
        K.CLEANUP_FAILED,
    )
    assert frozenset(FINAL_OUTCOME_PRECEDENCE) == FINAL_CLEANUP_OUTCOMES


@pytest.mark.parametrize("first_is_deleted", [True, False])
def test_of_two_final_outcomes_the_deleted_one_is_kept_whichever_came_first(first_is_deleted: bool) -> None:
    deleted, already = _outcome(K.CLEANUP_DELETED), _outcome(K.CLEANUP_ALREADY_DELETED, attempt=1)
    kept, new = (deleted, already) if first_is_deleted else (already, deleted)
    assert preferred_outcome(kept, new) is deleted


def test_a_repeated_step_keeps_the_one_kept_already() -> None:
    first, repeat = _outcome(K.CLEANUP_ROW_MARKED), _outcome(K.CLEANUP_ROW_MARKED)
    assert preferred_outcome(first, repeat) is first

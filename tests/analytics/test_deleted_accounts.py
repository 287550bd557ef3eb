"""analytics/deleted_accounts.py: the accounts the lake shows cleanup deleted, for the repair."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from analytics import AnalyticsLakeEraser, LakeDeletedAccounts, LakeHandler
from analytics.lake import Lake
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def _outcome(kind: OutcomeKind, user: str, account: str) -> OutcomeEvent:
    event_id = uuid.uuid4().hex
    return OutcomeEvent(
        outcome_id=outcome_id(event_id, kind),
        kind=kind,
        occurred_at=NOW,
        user_id=user,
        array_account_id=account,
        source_event_id=event_id,
    )


def _land(lake: Lake, *outcomes: OutcomeEvent) -> None:
    handler = LakeHandler(lake)
    for outcome in outcomes:
        handler.add_outcome(outcome)
    handler.flush()


def test_each_account_cleanup_deleted_is_listed_once(lake: Lake) -> None:
    _land(
        lake,
        _outcome(OutcomeKind.CLEANUP_DELETED, "u1", "acct-1"),
        _outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, "u2", "acct-2"),
        _outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, "u1", "acct-1"),  # a replay
        _outcome(OutcomeKind.CLEANUP_REFUSED_BY_GUARD, "u3", "acct-3"),
        _outcome(OutcomeKind.CLEANUP_PARKED, "u4", "acct-4"),
    )
    assert list(LakeDeletedAccounts(lake).deleted_accounts()) == [("u1", "acct-1"), ("u2", "acct-2")]


def test_the_account_of_a_user_being_erased_is_not_listed(lake: Lake) -> None:
    _land(
        lake,
        _outcome(OutcomeKind.CLEANUP_DELETED, "u1", "acct-1"),
        _outcome(OutcomeKind.CLEANUP_DELETED, "u2", "acct-2"),
    )
    AnalyticsLakeEraser(lake).mask(["u1"])
    assert list(LakeDeletedAccounts(lake).deleted_accounts()) == [("u2", "acct-2")]

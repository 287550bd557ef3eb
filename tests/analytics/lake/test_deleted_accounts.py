"""analytics/lake/deleted_accounts.py: the accounts the lake shows cleanup deleted, for the repair."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

from analytics import AnalyticsLakeEraser, LakeDeletedAccounts
from analytics.lake import Lake
from schema.outcomes import OutcomeKind
from tests.support.outcomes import cleanup_outcome, land_outcomes

NOW = datetime(2026, 3, 1, tzinfo=UTC)


_outcome = partial(cleanup_outcome, occurred_at=NOW)


def test_each_account_cleanup_deleted_is_listed_once(lake: Lake) -> None:
    land_outcomes(
        lake,
        _outcome(OutcomeKind.CLEANUP_DELETED, "u1", "acct-1"),
        _outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, "u2", "acct-2"),
        _outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, "u1", "acct-1"),  # a replay
        _outcome(OutcomeKind.CLEANUP_REFUSED_BY_GUARD, "u3", "acct-3"),
        _outcome(OutcomeKind.CLEANUP_PARKED, "u4", "acct-4"),
    )
    assert list(LakeDeletedAccounts(lake).deleted_accounts()) == [("u1", "acct-1"), ("u2", "acct-2")]


def test_the_account_of_a_user_being_erased_is_not_listed(lake: Lake) -> None:
    land_outcomes(
        lake,
        _outcome(OutcomeKind.CLEANUP_DELETED, "u1", "acct-1"),
        _outcome(OutcomeKind.CLEANUP_DELETED, "u2", "acct-2"),
    )
    AnalyticsLakeEraser(lake).mask(["u1"])
    assert list(LakeDeletedAccounts(lake).deleted_accounts()) == [("u2", "acct-2")]

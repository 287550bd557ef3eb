"""Cleanup outcomes as the handler records them, and landing them in a lake through the lake's handler."""

from __future__ import annotations

__all__ = ["cleanup_outcome", "land_outcomes"]

import uuid
from datetime import datetime

from analytics import LakeHandler
from analytics.lake import Lake
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id


def cleanup_outcome(kind: OutcomeKind, user: str, account: str, *, occurred_at: datetime) -> OutcomeEvent:
    """An outcome of `kind` for `user`'s `account`, from a source event of its own."""
    event_id = uuid.uuid4().hex
    return OutcomeEvent(
        outcome_id=outcome_id(event_id, kind),
        kind=kind,
        occurred_at=occurred_at,
        user_id=user,
        array_account_id=account,
        source_event_id=event_id,
    )


def land_outcomes(lake: Lake, *outcomes: OutcomeEvent) -> None:
    """Land `outcomes` in `lake` in one flush of its handler."""
    handler = LakeHandler(lake)
    for outcome in outcomes:
        handler.add_outcome(outcome)
    handler.flush()

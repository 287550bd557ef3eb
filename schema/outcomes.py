"""Outcome events: what a processor did about a stream event. They land in the lake (their own dataset),
never in the table (they would loop back through the stream).

Each outcome names the stream event it answers (`source`), so the audits can follow an expired cleanup
record to its final state. `outcome_id` is deterministic (source event id + kind + attempt), so a
replayed outcome lands once. Outcomes carry the user id so that an erasure can find and purge them.
"""

from __future__ import annotations

__all__ = ["FINAL_CLEANUP_OUTCOMES", "OutcomeEvent", "OutcomeKind", "OutcomeSink", "outcome_id"]

import hashlib
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict

OUTCOME_SCHEMA_VERSION = 1


class OutcomeKind(StrEnum):
    CLEANUP_DELETED = "cleanup.deleted"
    CLEANUP_ALREADY_DELETED = "cleanup.already_deleted"  # Array answered 404: success
    CLEANUP_REFUSED_BY_GUARD = "cleanup.refused_by_guard"  # an Active row still names the account
    CLEANUP_FAILED = "cleanup.failed"  # terminal (a 4xx other than 401/403/404)
    CLEANUP_PARKED = "cleanup.parked"  # moved to the durable retry queue
    CLEANUP_RETRIED = "cleanup.retried"  # a parked cleanup was attempted again
    CLEANUP_ROW_MARKED = "cleanup.row_marked"  # the entitlement row was set Removed
    CLEANUP_MARK_FAILED = "cleanup.mark_failed"  # best effort step failed (the seed's admitted gap)
    ERASURE_COMPLETED = "erasure.completed"


# An expired cleanup has reached a final state once one of these is recorded for it.
FINAL_CLEANUP_OUTCOMES = frozenset(
    {
        OutcomeKind.CLEANUP_DELETED,
        OutcomeKind.CLEANUP_ALREADY_DELETED,
        OutcomeKind.CLEANUP_REFUSED_BY_GUARD,
        OutcomeKind.CLEANUP_FAILED,
    }
)


def outcome_id(source_event_id: str, kind: OutcomeKind, attempt: int = 0) -> str:
    digest = hashlib.sha256(f"{source_event_id}|{kind.value}|{attempt}".encode()).hexdigest()
    return digest[:32]


class OutcomeEvent(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    schema_version: int = OUTCOME_SCHEMA_VERSION
    outcome_id: str
    kind: OutcomeKind
    occurred_at: datetime  # the processor's clock (simulated in demos), aware UTC
    user_id: str | None
    array_account_id: str | None
    # The stream event this answers; None for outcomes with no stream event (an erasure).
    source_event_id: str | None = None
    source_stream_arn: str | None = None
    source_shard_id: str | None = None
    source_sequence_number: str | None = None
    attempt: int = 0
    # A short machine code (an HTTP status, an error class name); never a body or a message text.
    detail: str | None = None


class OutcomeSink(Protocol):
    """Where processors put outcomes. The lake implements it; its flush precedes the checkpoint."""

    def add_outcome(self, outcome: OutcomeEvent) -> None: ...

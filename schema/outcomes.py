"""Outcome events: what a processor did about a stream event. They land in the lake (their own dataset),
never in the table (they would loop back through the stream).

Each outcome names the stream event it answers (`source`), so the audits can follow an expired cleanup
record to its final state. `outcome_id` is deterministic, so a replayed outcome lands once:

- a step (parked, retried, row marked, mark failed) is identified by (source event, kind, attempt);
- a **final** outcome (`FINAL_CLEANUP_OUTCOMES`) is identified by (source event, final), whatever its
  kind and attempt: an expiry has one final outcome, and a crash replay that answers it again (the repeat
  delete answers 404: already deleted) replaces it rather than adding a second. Of two final outcomes of
  one expiry, readers keep the one first in `FINAL_OUTCOME_PRECEDENCE` (deleted > already deleted >
  refused by the guard > failed): once this processor deleted the account, that is what happened.

Outcomes carry the user id so that an erasure can find and purge them.
"""

from __future__ import annotations

__all__ = [
    "FINAL_CLEANUP_OUTCOMES",
    "FINAL_OUTCOME_PRECEDENCE",
    "FlushingSink",
    "OutcomeEvent",
    "OutcomeKind",
    "OutcomeSink",
    "final_rank",
    "outcome_id",
    "preferred_outcome",
]

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
    CLEANUP_MARK_FAILED = "cleanup.mark_failed"  # best effort step failed (the service design's admitted gap)
    # Shadow mode (config.CleanupSettings.mode): the guard passed and the delete would have been sent;
    # none was, and no row was marked. A step, not a final outcome: the account was not deleted.
    CLEANUP_WOULD_DELETE = "cleanup.would_delete"
    ERASURE_COMPLETED = "erasure.completed"
    # The service's Array link writes (arraylink, from the endpoint or the relinker): no stream record
    # is written for a link (its put changes nothing), so these outcomes are its record.
    LINK_LINKED = "link.linked"
    LINK_NOT_ACTIVE = "link.not_active"  # SaveIfActive refused the write: terminal, never retried
    LINK_FAILED = "link.failed"  # retries exhausted (the job is redelivered) or a downstream refusal
    # A second Array signup whose retire of the old row was refused: the new row was kept alone.
    SECOND_SIGNUP_RETIRE_REFUSED = "second_signup.retire_refused"
    # The service had Array create an account for a signup or a second signup, before writing the row
    # naming it (analytics/sql/audits/array_account_without_row.sql finds one that no row names).
    ARRAY_ACCOUNT_CREATED = "array.account_created"
    # A signup or second signup that lost the user's guard to a concurrent request (answered 409
    # concurrent_request): the account Array created for it is scheduled on its stale key (detail
    # `<by>:scheduled_stale`, by = signup or second_signup; `<by>:row_exists`, `<by>:schedule_failed`).
    SIGNUP_RACE_LOST = "signup.race_lost"


# The final outcomes of an expired cleanup, the one to keep first: of two recorded for one expiry (a crash
# replay), the earlier in this order is what happened. analytics/sql/21_outcomes.sql states the same list.
FINAL_OUTCOME_PRECEDENCE: tuple[OutcomeKind, ...] = (
    OutcomeKind.CLEANUP_DELETED,
    OutcomeKind.CLEANUP_ALREADY_DELETED,
    OutcomeKind.CLEANUP_REFUSED_BY_GUARD,
    OutcomeKind.CLEANUP_FAILED,
)
# An expired cleanup has reached a final state once one of these is recorded for it.
FINAL_CLEANUP_OUTCOMES = frozenset(FINAL_OUTCOME_PRECEDENCE)
_FINAL = "final"


def final_rank(kind: OutcomeKind | str) -> int | None:
    """A final outcome's place in `FINAL_OUTCOME_PRECEDENCE` (0 is kept first); None for a step. A kind's
    stored text ranks as its member does (the kinds are a StrEnum)."""
    return FINAL_OUTCOME_PRECEDENCE.index(kind) if kind in FINAL_CLEANUP_OUTCOMES else None


def outcome_id(source_event_id: str, kind: OutcomeKind, attempt: int = 0) -> str:
    """The outcome's identity: (source event, final) for a final outcome, (source event, kind, attempt)
    for a step."""
    key = (
        f"{source_event_id}|{_FINAL}"
        if kind in FINAL_CLEANUP_OUTCOMES
        else f"{source_event_id}|{kind.value}|{attempt}"
    )
    return hashlib.sha256(key.encode()).hexdigest()[:32]


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


def preferred_outcome(kept: OutcomeEvent, new: OutcomeEvent) -> OutcomeEvent:
    """Of two outcomes with one identity, the one to keep: the first in `FINAL_OUTCOME_PRECEDENCE` for
    final outcomes, else (a repeat of the same step) the one kept already."""
    kept_rank, new_rank = final_rank(kept.kind), final_rank(new.kind)
    if kept_rank is not None and new_rank is not None and new_rank < kept_rank:
        return new
    return kept


class OutcomeSink(Protocol):
    """Where processors put outcomes. The lake implements it; its flush precedes the checkpoint."""

    def add_outcome(self, outcome: OutcomeEvent) -> None: ...


class FlushingSink(Protocol):
    """An outcome sink whose `flush` returns when the outcomes handed to it are durable (the lake's
    landing): what the service's recorder and the erasure's completion write through."""

    def add_outcome(self, outcome: OutcomeEvent) -> None: ...

    def flush(self) -> None: ...

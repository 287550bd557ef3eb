"""One attempt at one cleanup, shared by the stream handler and the retry worker:

1. the in-use guard: GSI1 lists the rows naming the account; an Active one refuses the delete (recorded);
   an unreadable GSI1 parks the work (fail closed: never delete blind);
2. the delete at Array, of the account the record names; 404 is success; 401/403 and exhausted transient
   failures park; any other refusal is a terminal failure (recorded). Before the request is sent, the
   expiry is noted durably (`DeletionNotes.note_sending`, write-ahead), and the attempt says so
   (`AttemptResult.delete_sent`, carried by parked work). A 404 is this processor's delete
   (`cleanup.deleted`) when a delete of the expiry was sent before (an earlier attempt's note or parked
   work, or an unanswered request of this call), and `cleanup.already_deleted` otherwise (noted `GONE`).
   Nothing else in this system deletes Array accounts (the service design), so an account gone after this
   expiry's delete was sent is gone by that delete; `processors.cleanup._notes` states the rule in full;
3. after a delete (or a 404), each row naming the account that is not Removed is marked Removed with a
   conditional update; best effort: a failure is recorded, never retried.

Between 1 and 2 stands the valve (`DeleteValve`, docs/operations/cleanup.md): in shadow mode the attempt
records `cleanup.would_delete` and ends (no delete, no mark); past the hourly delete budget
it parks (`delete_budget`) and `entitlements_cleanup_deletes_held` rises.

The attempt records its outcomes in an `AttemptResult` rather than emitting them, so that only one thread
talks to the sink. The caller may stop waiting for an attempt (its flush's deadline): it then `close`s the
result, takes the outcomes recorded so far (a delete already answered is not lost), and an attempt that
carries on after that records nothing more and never starts a delete.
"""

from __future__ import annotations

__all__ = ["AttemptResult", "CleanupProcedure", "CredentialGate"]

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import telemetry
from adapters import (
    ArrayClient,
    ArrayCredentialError,
    ArrayRequestRejected,
    ArrayTransientError,
    ErrArrayUserAlreadyDeleted,
)
from pipeline.clock import Clock
from processors.cleanup._clients import DynamoDBClient
from processors.cleanup._errors import GuardUnavailableError
from processors.cleanup._notes import DeletionNotes, NoteState
from processors.cleanup._table import RowRef, find_rows_for_account, mark_row_removed
from processors.cleanup._valve import DeleteValve
from processors.cleanup._work import CleanupWork
from schema.errors import RetryableError, TerminalError
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id
from schema.table_writes import business_time

logger = logging.getLogger(__name__)


class CredentialGate:
    """Once Array refuses our credentials, the rest of a batch parks without calling Array again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._code: str | None = None

    @property
    def code(self) -> str | None:
        with self._lock:
            return self._code

    def trip(self, code: str) -> None:
        with self._lock:
            if self._code is None:
                self._code = code


@dataclass(slots=True)
class AttemptResult:
    outcomes: list[OutcomeEvent] = field(default_factory=list)
    # Set when the work must be parked (a short reason code); None when it reached a final state.
    park_reason: str | None = None
    # Where the attempt is: "guard", "array", "mark", then "done" (the code of a deadline's park).
    stage: str = "start"
    # A delete request of this attempt may have reached Array (set before it is sent): parked work
    # carries it, so that the retry's 404 is reported as this processor's delete.
    delete_sent: bool = False
    closed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, outcome: OutcomeEvent) -> None:
        with self._lock:
            if not self.closed:
                self.outcomes.append(outcome)

    def park(self, reason: str) -> None:
        with self._lock:
            if not self.closed:
                self.park_reason = reason

    def enter(self, stage: str) -> bool:
        """Move to `stage`; False once the caller has closed the result (stop: nobody reads on)."""
        with self._lock:
            if self.closed:
                return False
            self.stage = stage
            return True

    def begin_delete(self, *, counts: bool = True) -> bool:
        """About to send the delete; False once the caller has closed the result (then it is never
        sent). `counts`: a 404 after it would be this processor's delete (not when noted `GONE`)."""
        with self._lock:
            if self.closed:
                return False
            self.delete_sent = self.delete_sent or counts
            return True

    def close(self) -> tuple[list[OutcomeEvent], str]:
        """Stop recording; the outcomes so far and the stage the attempt had reached."""
        with self._lock:
            self.closed = True
            return list(self.outcomes), self.stage


def make_outcome(
    clock: Clock, work: CleanupWork, kind: OutcomeKind, detail: str | None = None
) -> OutcomeEvent:
    telemetry.cleanup_outcome(kind.value)  # every outcome a cleanup reaches is made here
    return OutcomeEvent(
        outcome_id=outcome_id(work.source_event_id, kind, work.attempt),
        kind=kind,
        occurred_at=clock.now(),
        user_id=work.user_id,
        array_account_id=work.array_account_id,
        source_event_id=work.source_event_id,
        source_stream_arn=work.source_stream_arn,
        source_shard_id=work.source_shard_id,
        source_sequence_number=work.source_sequence_number,
        attempt=work.attempt,
        detail=detail,
    )


class CleanupProcedure:
    def __init__(
        self,
        *,
        dynamodb: DynamoDBClient,
        array: ArrayClient,
        table_name: str,
        clock: Clock,
        monotonic: Callable[[], float] = time.monotonic,
        deletion_notes: DeletionNotes | None = None,
        valve: DeleteValve | None = None,
    ) -> None:
        self._dynamodb = dynamodb
        self._valve = valve if valve is not None else DeleteValve()
        self._array = array
        self._table_name = table_name
        self._clock = clock
        self._monotonic = monotonic
        self._notes = deletion_notes

    def outcome(self, work: CleanupWork, kind: OutcomeKind, detail: str | None = None) -> OutcomeEvent:
        return make_outcome(self._clock, work, kind, detail)

    def attempt(
        self,
        work: CleanupWork,
        *,
        deadline: float | None,
        gate: CredentialGate | None = None,
        result: AttemptResult | None = None,
    ) -> AttemptResult:
        """Guard, delete, mark. `deadline` (a `monotonic` instant) bounds the start of every call to
        Array; past it the work parks (`budget`). Outcomes go to `result` (a new one by default)."""
        result = result if result is not None else AttemptResult()
        if self._past(deadline):
            result.park("budget")
            return result
        if gate is not None and gate.code is not None:  # Array refuses our credentials: ask nobody
            result.park(gate.code)
            return result
        if not result.enter("guard"):
            return result
        try:
            rows = find_rows_for_account(self._dynamodb, self._table_name, work.array_account_id)
        except GuardUnavailableError as failed:
            result.park(f"guard:{failed.code}")
            return result
        if any(row.is_active for row in rows):
            result.add(self.outcome(work, OutcomeKind.CLEANUP_REFUSED_BY_GUARD, "active_row"))
            result.enter("done")
            return result
        if gate is not None and gate.code is not None:  # tripped while the guard read GSI1
            result.park(gate.code)
            return result
        if self._past(deadline):  # the guard's read took the time left: never start a delete late
            result.park("budget")
            return result
        if self._valve.shadow:  # recorded, never sent: the row stays as it is
            result.add(self.outcome(work, OutcomeKind.CLEANUP_WOULD_DELETE, "shadow"))
            result.enter("done")
            return result
        if not self._valve.take():  # parked, so the retry worker sends it once the hour allows
            telemetry.cleanup_delete_held()
            result.park("delete_budget")
            return result
        if not result.enter("array"):
            return result
        final = self._delete(work, deadline, gate, result)
        if final is None:
            result.enter("done")
            return result
        result.add(final)
        if result.enter("mark"):
            result.add(self._mark(work, rows))
            result.enter("done")
        return result

    def _past(self, deadline: float | None) -> bool:
        return deadline is not None and self._monotonic() >= deadline

    def _delete(
        self, work: CleanupWork, deadline: float | None, gate: CredentialGate | None, result: AttemptResult
    ) -> OutcomeEvent | None:
        """The outcome of the delete when it succeeded; None when it parked or failed (already recorded).

        Write-ahead: the expiry is noted before the request is sent, so that a crash anywhere after the
        request left leaves the note (a crash before the note means no request was sent)."""
        noted = self._noted(work)
        sent_before = noted is NoteState.SENT or (work.delete_sent and noted is not NoteState.GONE)
        if noted is not NoteState.GONE:  # once gone before our first delete, a 404 stays not ours
            self._note(work, "sending")
        if not result.begin_delete(counts=noted is not NoteState.GONE):
            return None  # the caller stopped waiting: never start a delete late
        try:
            self._array.delete_user(work.array_account_id, deadline=deadline)
        except ErrArrayUserAlreadyDeleted as gone:
            if sent_before:  # this processor's earlier delete, whose outcome a crash (or park) lost
                return self.outcome(work, OutcomeKind.CLEANUP_DELETED, "earlier_attempt")
            if gone.after_unanswered:  # this call's earlier request was the delete
                return self.outcome(work, OutcomeKind.CLEANUP_DELETED, "earlier_request")
            if noted is not NoteState.GONE:
                self._note(work, "gone")
            return self.outcome(work, OutcomeKind.CLEANUP_ALREADY_DELETED, ErrArrayUserAlreadyDeleted.code)
        except ArrayCredentialError as failed:
            if gate is not None:
                gate.trip(failed.code)
            result.park(failed.code)
            return None
        except ArrayTransientError as failed:
            result.park(failed.code)
            return None
        except ArrayRequestRejected as failed:
            result.add(self.outcome(work, OutcomeKind.CLEANUP_FAILED, failed.code))
            return None
        except TerminalError as failed:
            result.add(self.outcome(work, OutcomeKind.CLEANUP_FAILED, type(failed).__name__))
            return None
        except RetryableError as failed:
            result.park(type(failed).__name__)
            return None
        except Exception as failed:  # an unexpected client fault: parking is safe (a repeat answers 404)
            logger.warning("unexpected Array client error", extra={"code": type(failed).__name__})
            result.park(type(failed).__name__)
            return None
        if noted is NoteState.GONE:  # the account came back and is now deleted by us
            self._note(work, "sending")
        return self.outcome(work, OutcomeKind.CLEANUP_DELETED)

    def _note(self, work: CleanupWork, what: str) -> None:
        """Write the expiry's note. A note that cannot be written does not stop the delete (the
        cleanup is what matters; parked work still carries `delete_sent`): only a crash replay's report
        of it is weaker."""
        if self._notes is None:
            return
        try:
            if what == "gone":
                self._notes.note_gone(work.source_event_id)
            else:
                self._notes.note_sending(work.source_event_id)
        except OSError as failed:
            logger.warning("deletion note not written", extra={"code": type(failed).__name__})

    def _noted(self, work: CleanupWork) -> NoteState:
        if self._notes is None:
            return NoteState.NONE
        try:
            return self._notes.state(work.source_event_id)
        except OSError as failed:
            logger.warning("deletion notes unreadable", extra={"code": type(failed).__name__})
            return NoteState.NONE

    def _mark(self, work: CleanupWork, rows: list[RowRef]) -> OutcomeEvent:
        if not rows:
            return self.outcome(work, OutcomeKind.CLEANUP_MARK_FAILED, "row_not_found")
        to_mark = [row for row in rows if not row.is_removed]
        if not to_mark:
            return self.outcome(work, OutcomeKind.CLEANUP_ROW_MARKED, "already_removed")
        updated_at = business_time(self._clock.now())
        failures = [
            result.code
            for result in (
                mark_row_removed(
                    self._dynamodb, self._table_name, row, work.array_account_id, updated_at, read_back=True
                )
                for row in to_mark
            )
            if not result.marked
        ]
        if failures:
            return self.outcome(work, OutcomeKind.CLEANUP_MARK_FAILED, failures[0])
        return self.outcome(work, OutcomeKind.CLEANUP_ROW_MARKED, "marked")

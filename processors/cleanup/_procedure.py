"""One attempt at one cleanup, shared by the stream handler and the retry worker:

0. the expiry's note (`processors.cleanup._notes`): an attempt first claims the expiry (one attempt of
   it at a time on the host; a second one parks, `in_flight`) and reads its note. A **final** note (the
   expiry's final outcome, written before the outcome was handed on) ends the attempt without calling
   Array: the same final outcome is recorded again (its id is per expiry, so it replaces itself) and the
   rows are marked as after a delete. A crash replay, a replay after the lake failed and a doubled retry
   message so make no second delete;
1. the in-use guard: GSI1 lists the rows naming the account; an Active one refuses the delete (recorded,
   noted final); an unreadable GSI1 parks the work (fail closed: never delete blind);
2. the delete at Array, of the account the record names; 2xx is `cleanup.deleted`, 404 is
   `cleanup.already_deleted` (success); 401/403 and exhausted transient failures park; any other
   refusal is a terminal failure (recorded, noted final). The note says `SENDING` before the request
   (unconfirmed: it may not leave), `SENT` once the request is known to have reached Array unanswered
   (`AttemptResult.delete_sent`, carried by parked work), and the final outcome once it is known. The
   404's detail says what came before it: `earlier_attempt` (a confirmed earlier request),
   `earlier_request` (an unanswered request of this call), `unconfirmed_attempt` (a request that may
   never have left), else `404`;
3. after a delete (or a 404), each row naming the account that is not Removed is marked Removed with a
   conditional update; best effort: a failure is recorded, never retried.

Between 1 and 2 stands the valve (`DeleteValve`, docs/operations/cleanup.md): in shadow mode the attempt
records `cleanup.would_delete` and ends (no delete, no mark); past the hourly delete budget
it parks (`delete_budget`) and `entitlements_cleanup_deletes_held` rises.

The attempt records its outcomes in an `AttemptResult` rather than emitting them, so that only one thread
talks to the sink. The caller may stop waiting for an attempt (its flush's deadline): it then `close`s the
result, takes the outcomes recorded so far (a delete already answered is not lost), and an attempt that
carries on after that records nothing more and never starts a delete (its notes are still written: they
are what a later attempt reads).
"""

from __future__ import annotations

__all__ = ["AttemptResult", "CleanupProcedure", "CredentialGate", "final_note_of"]

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import telemetry
from adapters import (
    ArrayClient,
    ArrayCredentialError,
    ArrayRequestRejected,
    ArrayTransientError,
    ErrArrayUserAlreadyDeleted,
)
from processors.cleanup._clients import DynamoDBClient
from processors.cleanup._errors import GuardUnavailableError
from processors.cleanup._notes import DeletionNotes, Note, NoteState
from processors.cleanup._table import RowRef, find_rows_for_account, mark_row_removed
from processors.cleanup._valve import DeleteValve
from processors.cleanup._work import CleanupWork
from schema.clock import Clock
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
    # A delete request of this attempt is known to have reached Array (answered, or unanswered after
    # it was sent): parked work carries it, so that a retry's 404 says `earlier_attempt` on any host.
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

    def begin_delete(self) -> bool:
        """About to send the delete; False once the caller has closed the result (then it is never
        sent)."""
        with self._lock:
            return not self.closed

    def request_left(self) -> None:
        """A delete request of this attempt reached Array (set whether or not the result is closed)."""
        with self._lock:
            self.delete_sent = True

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


# The outcome a final note records again.
_FINAL_KINDS = {
    NoteState.DELETED: OutcomeKind.CLEANUP_DELETED,
    NoteState.GONE: OutcomeKind.CLEANUP_ALREADY_DELETED,
    NoteState.REFUSED: OutcomeKind.CLEANUP_REFUSED_BY_GUARD,
    NoteState.FAILED: OutcomeKind.CLEANUP_FAILED,
}


_FINAL_STATES = {kind: state for state, kind in _FINAL_KINDS.items()}


def final_note_of(outcomes: list[OutcomeEvent]) -> Note | None:
    """The final note the first final outcome among `outcomes` stands for; None when there is none."""
    for outcome in outcomes:
        if outcome.kind in _FINAL_STATES:
            return Note(_FINAL_STATES[outcome.kind], outcome.detail)
    return None


def _final_carried_by(work: CleanupWork) -> Note | None:
    if work.final_state is None:
        return None
    try:
        note = Note(NoteState(work.final_state), work.final_detail)
    except ValueError:  # a word this version does not know: the notes and Array decide as usual
        return None
    return note if note.final else None


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
        """Note, guard, delete, mark. `deadline` (a `monotonic` instant) bounds the start of every call
        to Array; past it the work parks (`budget`). Outcomes go to `result` (a new one by default)."""
        result = result if result is not None else AttemptResult()
        if self._past(deadline):
            result.park("budget")
            return result
        if gate is not None and gate.code is not None:  # Array refuses our credentials: ask nobody
            result.park(gate.code)
            return result
        if not result.enter("guard"):
            return result
        with self._claim(work) as held:
            if not held:  # another attempt of this expiry runs on this host: it does the work
                result.park("in_flight")
                return result
            self._attempt_held(work, deadline, gate, result)
        return result

    def _attempt_held(
        self, work: CleanupWork, deadline: float | None, gate: CredentialGate | None, result: AttemptResult
    ) -> None:
        note = self._read(work)
        if not note.final:
            note = _final_carried_by(work) or note
        if note.final:
            self._again(work, note, result)
            return
        try:
            rows = find_rows_for_account(self._dynamodb, self._table_name, work.array_account_id)
        except GuardUnavailableError as failed:
            result.park(f"guard:{failed.code}")
            return
        if any(row.is_active for row in rows):
            result.add(self._final(work, NoteState.REFUSED, "active_row"))
            result.enter("done")
            return
        if gate is not None and gate.code is not None:  # tripped while the guard read GSI1
            result.park(gate.code)
            return
        if self._past(deadline):  # the guard's read took the time left: never start a delete late
            result.park("budget")
            return
        if self._valve.shadow:  # recorded, never sent: the row stays as it is
            result.add(self.outcome(work, OutcomeKind.CLEANUP_WOULD_DELETE, "shadow"))
            result.enter("done")
            return
        if not self._valve.take():  # parked, so the retry worker sends it once the hour allows
            telemetry.cleanup_delete_held()
            result.park("delete_budget")
            return
        if not result.enter("array"):
            return
        final = self._delete(work, note.state, deadline, gate, result)
        if final is None:
            result.enter("done")
            return
        result.add(final)
        if result.enter("mark"):
            result.add(self._mark(work, rows))
            result.enter("done")

    def _again(self, work: CleanupWork, note: Note, result: AttemptResult) -> None:
        """The expiry's final outcome is noted: record it again, and after a delete mark the rows (a
        replay's outcomes were lost with the lake's buffer, its mark may never have run)."""
        kind = _FINAL_KINDS[note.state]
        result.add(self.outcome(work, kind, note.detail))
        if kind not in (OutcomeKind.CLEANUP_DELETED, OutcomeKind.CLEANUP_ALREADY_DELETED):
            result.enter("done")
            return
        if not result.enter("mark"):
            return
        try:
            rows = find_rows_for_account(self._dynamodb, self._table_name, work.array_account_id)
        except GuardUnavailableError as failed:
            result.add(self.outcome(work, OutcomeKind.CLEANUP_MARK_FAILED, f"guard:{failed.code}"))
        else:
            result.add(self._mark(work, rows))
        result.enter("done")

    def _past(self, deadline: float | None) -> bool:
        return deadline is not None and self._monotonic() >= deadline

    def _delete(
        self,
        work: CleanupWork,
        noted: NoteState,
        deadline: float | None,
        gate: CredentialGate | None,
        result: AttemptResult,
    ) -> OutcomeEvent | None:
        """The outcome of the delete when it succeeded; None when it parked or failed (already recorded).

        `SENDING` is noted before the request (unconfirmed: it may not leave), `SENT` once it is known
        to have reached Array unanswered, the final outcome as soon as it is known."""
        if noted is NoteState.NONE:
            self._note(work, NoteState.SENDING)
        if not result.begin_delete():
            return None  # the caller stopped waiting: never start a delete late
        confirmed_before = noted is NoteState.SENT or work.delete_sent
        try:
            self._array.delete_user(work.array_account_id, deadline=deadline)
        except ErrArrayUserAlreadyDeleted as gone:
            if confirmed_before:  # most likely this processor's earlier request, whose answer was lost
                detail = "earlier_attempt"
            elif gone.after_unanswered:  # this call's earlier request may have been the delete
                detail = "earlier_request"
            elif noted is NoteState.SENDING:  # an earlier request may never have left
                detail = "unconfirmed_attempt"
            else:
                detail = ErrArrayUserAlreadyDeleted.code
            return self._final(work, NoteState.GONE, detail)
        except ArrayCredentialError as failed:
            if gate is not None:
                gate.trip(failed.code)
            result.park(failed.code)
            return None
        except ArrayTransientError as failed:
            if failed.unanswered:  # a request reached Array and may have been applied unseen
                result.request_left()
                if noted is not NoteState.SENT:
                    self._note(work, NoteState.SENT)
            result.park(failed.code)
            return None
        except ArrayRequestRejected as failed:
            result.add(self._final(work, NoteState.FAILED, failed.code))
            return None
        except TerminalError as failed:
            result.add(self._final(work, NoteState.FAILED, type(failed).__name__))
            return None
        except RetryableError as failed:
            result.park(type(failed).__name__)
            return None
        except Exception as failed:  # an unexpected client fault: parking is safe (a repeat answers 404)
            logger.warning("unexpected Array client error", extra={"code": type(failed).__name__})
            result.park(type(failed).__name__)
            return None
        return self._final(work, NoteState.DELETED, None)

    def _final(self, work: CleanupWork, state: NoteState, detail: str | None) -> OutcomeEvent:
        """The expiry's final outcome, noted before it is handed on: a later attempt finds it."""
        self._note(work, state, detail)
        return self.outcome(work, _FINAL_KINDS[state], detail)

    @contextmanager
    def _claim(self, work: CleanupWork) -> Iterator[bool]:
        if self._notes is None:
            yield True
            return
        try:
            claim = self._notes.claim(work.source_event_id)
            held = claim.__enter__()
        except OSError as failed:  # the notes folder is unusable: the cleanup is what matters
            logger.warning("cleanup claim not taken", extra={"code": type(failed).__name__})
            yield True
            return
        try:
            yield held
        finally:
            claim.__exit__(None, None, None)

    def _note(self, work: CleanupWork, state: NoteState, detail: str | None = None) -> None:
        """Write the expiry's note. A note that cannot be written does not stop the cleanup (parked
        work still carries `delete_sent`): only a later attempt's skip and its 404's detail are weaker."""
        if self._notes is None:
            return
        try:
            self._notes.note(work.source_event_id, state, detail)
        except OSError as failed:
            logger.warning("deletion note not written", extra={"code": type(failed).__name__})

    def _read(self, work: CleanupWork) -> Note:
        if self._notes is None:
            return Note(NoteState.NONE)
        try:
            return self._notes.read(work.source_event_id)
        except OSError as failed:
            logger.warning("deletion notes unreadable", extra={"code": type(failed).__name__})
            return Note(NoteState.NONE)

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

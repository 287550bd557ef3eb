"""processors/cleanup/_procedure.py: the write-ahead deletion note, and what a replay's 404 reports.

A crash is a `Killed` raised out of the Array call (a BaseException, as nothing catches a kill -9): the
note was written before the call, and nothing after the crash point runs. The replay is a fresh
procedure on the same notes folder, as a restarted child would build it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters import ArrayClient, ErrArrayUserAlreadyDeleted, HttpArrayClient
from devstack.fake_array import FakeArrayServer
from processors.cleanup._notes import LocalDeletionNotes, NoteState
from processors.cleanup._procedure import AttemptResult, CleanupProcedure
from processors.cleanup._work import CleanupWork, work_from_event
from schema.outcomes import FINAL_CLEANUP_OUTCOMES, OutcomeEvent, OutcomeKind
from tests.processors.cleanup.cleanup_helpers import FixedClock, make_expiry

K = OutcomeKind


class Killed(BaseException):
    """The process is killed here (kill -9): nothing after this point runs."""


class _KilledBeforeTheRequest:
    def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
        raise Killed


class _KilledAfterArrayApplied:
    """Array receives and applies the delete; the process dies before it reads the answer."""

    def __init__(self, array: ArrayClient) -> None:
        self._array = array

    def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
        self._array.delete_user(array_user_id, deadline=deadline)
        raise Killed


@pytest.fixture
def procedure(dynamodb: Any, table: str, clock: FixedClock) -> Callable[..., CleanupProcedure]:
    def make(array: ArrayClient, notes: LocalDeletionNotes | None) -> CleanupProcedure:
        return CleanupProcedure(
            dynamodb=dynamodb, array=array, table_name=table, clock=clock, deletion_notes=notes
        )

    return make


@pytest.fixture
def work(fake_array: FakeArrayServer, put_row: Callable[[str, str, str], None]) -> CleanupWork:
    """The work of an expiry naming `acct-1`, an account Array holds, whose row is Superseded."""
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Superseded")
    return work_from_event(make_expiry("u1", "acct-1"))


def _final(result: AttemptResult) -> OutcomeEvent:
    [final] = [o for o in result.outcomes if o.kind in FINAL_CLEANUP_OUTCOMES]
    return final


def _notes(tmp_path: Path) -> LocalDeletionNotes:
    return LocalDeletionNotes(tmp_path / "notes")


def test_the_note_is_durable_before_the_delete_request_is_sent(
    procedure: Callable[..., CleanupProcedure], work: CleanupWork, tmp_path: Path
) -> None:
    seen: list[NoteState] = []

    class Array:
        def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
            seen.append(_notes(tmp_path).state(work.source_event_id))  # read as another process would

    procedure(Array(), _notes(tmp_path)).attempt(work, deadline=None)
    assert seen == [NoteState.SENT]


def test_a_crash_after_the_note_and_before_the_request_replays_into_a_delete(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    tmp_path: Path,
) -> None:
    with pytest.raises(Killed):
        procedure(_KilledBeforeTheRequest(), _notes(tmp_path)).attempt(work, deadline=None)
    replay = procedure(array_client, _notes(tmp_path)).attempt(work, deadline=None)
    assert [c.status for c in fake_array.calls()] == [200]
    assert (_final(replay).kind, _final(replay).detail) == (K.CLEANUP_DELETED, None)


def test_a_crash_after_array_applied_the_delete_replays_its_404_as_deleted(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    tmp_path: Path,
) -> None:
    with pytest.raises(Killed):
        procedure(_KilledAfterArrayApplied(array_client), _notes(tmp_path)).attempt(work, deadline=None)
    replay = procedure(array_client, _notes(tmp_path)).attempt(work, deadline=None)
    assert [c.status for c in fake_array.calls()] == [200, 404]
    assert (_final(replay).kind, _final(replay).detail) == (K.CLEANUP_DELETED, "earlier_attempt")


def test_without_notes_the_same_crash_replays_as_already_deleted(
    procedure: Callable[..., CleanupProcedure], work: CleanupWork, array_client: HttpArrayClient
) -> None:
    with pytest.raises(Killed):
        procedure(_KilledAfterArrayApplied(array_client), None).attempt(work, deadline=None)
    replay = procedure(array_client, None).attempt(work, deadline=None)
    assert _final(replay).kind is K.CLEANUP_ALREADY_DELETED


def test_an_account_gone_before_the_first_delete_is_already_deleted_on_every_replay(
    procedure: Callable[..., CleanupProcedure],
    put_row: Callable[[str, str, str], None],
    array_client: HttpArrayClient,
    tmp_path: Path,
) -> None:
    put_row("u2", "acct-gone", "Superseded")  # Array never held it: every delete answers 404
    gone = work_from_event(make_expiry("u2", "acct-gone"))
    first = procedure(array_client, _notes(tmp_path)).attempt(gone, deadline=None)
    replay = procedure(array_client, _notes(tmp_path)).attempt(gone, deadline=None)
    assert [_final(first).kind, _final(replay).kind] == [K.CLEANUP_ALREADY_DELETED] * 2
    assert _notes(tmp_path).state(gone.source_event_id) is NoteState.GONE


def test_a_404_after_an_unanswered_request_of_the_same_call_is_this_processors_delete(
    procedure: Callable[..., CleanupProcedure], work: CleanupWork, tmp_path: Path
) -> None:
    class Array:  # the first request timed out after Array applied it; the client's retry saw 404
        def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
            raise ErrArrayUserAlreadyDeleted("gone", after_unanswered=True)

    result = procedure(Array(), _notes(tmp_path)).attempt(work, deadline=None)
    assert (_final(result).kind, _final(result).detail) == (K.CLEANUP_DELETED, "earlier_request")


def test_parked_work_that_says_its_delete_was_sent_reports_a_404_as_deleted_on_any_host(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    array_client: HttpArrayClient,
    tmp_path: Path,
) -> None:
    array_client.delete_user(work.array_account_id)  # the stream attempt's delete, applied unseen
    parked = work.model_copy(update={"attempt": 1, "delete_sent": True})
    elsewhere = procedure(array_client, LocalDeletionNotes(tmp_path / "another-host"))
    result = elsewhere.attempt(parked, deadline=None)
    assert (_final(result).kind, _final(result).detail) == (K.CLEANUP_DELETED, "earlier_attempt")


def test_an_attempt_that_sent_its_delete_says_so_for_the_work_it_parks(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
) -> None:
    fake_array.expire_credentials()  # a 401: parked after the request was sent
    result = procedure(array_client, None).attempt(work, deadline=None)
    assert (result.park_reason, result.delete_sent) == ("401", True)


def test_an_attempt_its_caller_stopped_waiting_for_while_noting_never_sends_the_delete(
    procedure: Callable[..., CleanupProcedure], work: CleanupWork, tmp_path: Path
) -> None:
    sent: list[str] = []
    result = AttemptResult()

    class Notes(LocalDeletionNotes):  # the flush's deadline closes the result while the note is written
        def note_sending(self, source_event_id: str) -> None:
            super().note_sending(source_event_id)
            result.close()

    class Array:
        def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
            sent.append(array_user_id)

    procedure(Array(), Notes(tmp_path / "notes")).attempt(work, deadline=None, result=result)
    assert (sent, result.delete_sent) == ([], False)

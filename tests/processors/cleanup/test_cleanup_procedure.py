"""processors/cleanup/_procedure.py: the expiry's notes (unconfirmed before the request, confirmed once it
reached Array, final once the outcome is known), what a later attempt skips, and what a 404 reports.

A crash is a `Killed` raised out of the Array call (a BaseException, as nothing catches a kill -9): the
note was written before the call, and nothing after the crash point runs. The replay is a fresh
procedure on the same notes folder, as a restarted child would build it.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters import ArrayClient, ErrArrayUserAlreadyDeleted, HttpArrayClient
from config import ArraySettings
from devstack.fake_array import FakeArrayServer
from processors.cleanup._notes import LocalDeletionNotes, NoteState
from processors.cleanup._procedure import AttemptResult, CleanupProcedure
from processors.cleanup._work import CleanupWork, work_from_event
from schema.outcomes import FINAL_CLEANUP_OUTCOMES, OutcomeEvent, OutcomeKind
from tests.processors.cleanup.cleanup_helpers import FixedClock, make_expiry

K = OutcomeKind


class Killed(BaseException):
    """The process is killed here (kill -9): nothing after this point runs."""


def _closed_port() -> int:
    """A loopback port nobody listens on: a connection to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
    assert seen == [NoteState.SENDING]  # unconfirmed: the request may not leave
    assert _notes(tmp_path).state(work.source_event_id) is NoteState.DELETED


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


def test_a_crash_after_array_applied_the_delete_replays_its_404_as_already_deleted_unconfirmed(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    tmp_path: Path,
) -> None:
    with pytest.raises(Killed):
        procedure(_KilledAfterArrayApplied(array_client), _notes(tmp_path)).attempt(work, deadline=None)
    replay = procedure(array_client, _notes(tmp_path)).attempt(work, deadline=None)
    # The one repeated request a kill can cause: the answer came, its final note did not.
    assert [c.status for c in fake_array.calls()] == [200, 404]
    assert (_final(replay).kind, _final(replay).detail) == (K.CLEANUP_ALREADY_DELETED, "unconfirmed_attempt")


def test_without_notes_the_same_crash_replays_as_already_deleted(
    procedure: Callable[..., CleanupProcedure], work: CleanupWork, array_client: HttpArrayClient
) -> None:
    with pytest.raises(Killed):
        procedure(_KilledAfterArrayApplied(array_client), None).attempt(work, deadline=None)
    replay = procedure(array_client, None).attempt(work, deadline=None)
    assert _final(replay).kind is K.CLEANUP_ALREADY_DELETED


def test_a_plain_first_time_404_is_already_deleted_and_its_replay_calls_nobody(
    procedure: Callable[..., CleanupProcedure],
    put_row: Callable[[str, str, str], None],
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    tmp_path: Path,
) -> None:
    put_row("u2", "acct-gone", "Superseded")  # Array never held it: a delete answers 404
    gone = work_from_event(make_expiry("u2", "acct-gone"))
    first = procedure(array_client, _notes(tmp_path)).attempt(gone, deadline=None)
    replay = procedure(array_client, _notes(tmp_path)).attempt(gone, deadline=None)
    assert [(_final(r).kind, _final(r).detail) for r in (first, replay)] == [
        (K.CLEANUP_ALREADY_DELETED, "404")
    ] * 2
    assert [c.status for c in fake_array.calls()] == [404]
    assert _notes(tmp_path).state(gone.source_event_id) is NoteState.GONE


def test_a_404_after_an_unanswered_request_of_the_same_call_is_already_deleted_after_it(
    procedure: Callable[..., CleanupProcedure], work: CleanupWork, tmp_path: Path
) -> None:
    class Array:  # the first request timed out after Array applied it; the client's retry saw 404
        def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
            raise ErrArrayUserAlreadyDeleted("gone", after_unanswered=True)

    result = procedure(Array(), _notes(tmp_path)).attempt(work, deadline=None)
    assert (_final(result).kind, _final(result).detail) == (K.CLEANUP_ALREADY_DELETED, "earlier_request")


def test_parked_work_whose_delete_reached_array_reports_a_404_after_it_on_any_host(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    array_client: HttpArrayClient,
    tmp_path: Path,
) -> None:
    array_client.delete_user(work.array_account_id)  # the stream attempt's delete, applied unseen
    parked = work.model_copy(update={"attempt": 1, "delete_sent": True})
    elsewhere = procedure(array_client, LocalDeletionNotes(tmp_path / "another-host"))
    result = elsewhere.attempt(parked, deadline=None)
    assert (_final(result).kind, _final(result).detail) == (K.CLEANUP_ALREADY_DELETED, "earlier_attempt")


def test_an_unanswered_request_is_noted_sent_and_said_of_the_work_it_parks(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    tmp_path: Path,
) -> None:
    fake_array.set_faults(timeout_rate=1.0, hang_seconds=1.0)  # every request applied, answer lost
    result = procedure(array_client, _notes(tmp_path)).attempt(work, deadline=None)
    assert (result.park_reason, result.delete_sent) == ("timeout", True)
    assert _notes(tmp_path).state(work.source_event_id) is NoteState.SENT


def test_a_404_after_a_confirmed_earlier_request_is_already_deleted_after_it(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    tmp_path: Path,
) -> None:
    fake_array.set_faults(timeout_rate=1.0, hang_seconds=1.0)
    procedure(array_client, _notes(tmp_path)).attempt(work, deadline=None)  # parks: noted SENT
    fake_array.clear_faults()
    retry = procedure(array_client, _notes(tmp_path)).attempt(
        work.model_copy(update={"attempt": 1}), deadline=None
    )
    assert (_final(retry).kind, _final(retry).detail) == (K.CLEANUP_ALREADY_DELETED, "earlier_attempt")


def test_a_404_after_an_attempt_that_never_reached_array_is_already_deleted_unconfirmed(
    procedure: Callable[..., CleanupProcedure],
    put_row: Callable[[str, str, str], None],
    array_client: HttpArrayClient,
    array_settings: ArraySettings,
    tmp_path: Path,
) -> None:
    put_row("u2", "acct-gone", "Superseded")  # Array never held it
    gone = work_from_event(make_expiry("u2", "acct-gone"))
    refused = array_settings.model_copy(update={"base_url": f"http://127.0.0.1:{_closed_port()}"})
    with HttpArrayClient(refused, backoff_base_seconds=0.01, backoff_max_seconds=0.02) as unreachable:
        first = procedure(unreachable, _notes(tmp_path)).attempt(gone, deadline=None)
    assert (first.park_reason, first.delete_sent) == ("ConnectError", False)  # refused: never left
    retry = procedure(array_client, _notes(tmp_path)).attempt(
        gone.model_copy(update={"attempt": 1}), deadline=None
    )
    assert (_final(retry).kind, _final(retry).detail) == (K.CLEANUP_ALREADY_DELETED, "unconfirmed_attempt")


def test_an_expiry_noted_final_is_recorded_again_and_marked_without_calling_array(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    fake_array: FakeArrayServer,
    get_row: Callable[[str, str], dict[str, str] | None],
    tmp_path: Path,
) -> None:
    _notes(tmp_path).note(work.source_event_id, NoteState.DELETED)  # an earlier attempt's 2xx

    class Array:
        def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
            raise AssertionError("a finished expiry called Array")

    replay = procedure(Array(), _notes(tmp_path)).attempt(work, deadline=None)
    assert [(o.kind, o.detail) for o in replay.outcomes] == [
        (K.CLEANUP_DELETED, None),
        (K.CLEANUP_ROW_MARKED, "marked"),
    ]
    assert (get_row("u1", "acct-1") or {})["status"] == "Removed"


def test_a_refusal_by_the_guard_is_final_for_its_expiry(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    tmp_path: Path,
) -> None:
    put_row("u1", "acct-1", "Active")
    first = procedure(array_client, _notes(tmp_path)).attempt(work, deadline=None)
    put_row("u1", "acct-1", "Superseded")  # the row changed after the refusal was recorded
    replay = procedure(array_client, _notes(tmp_path)).attempt(work, deadline=None)
    assert [_final(r).kind for r in (first, replay)] == [K.CLEANUP_REFUSED_BY_GUARD] * 2
    assert fake_array.calls() == []


def test_a_second_attempt_while_one_holds_the_expiry_parks_and_sends_nothing(
    procedure: Callable[..., CleanupProcedure],
    work: CleanupWork,
    array_client: HttpArrayClient,
    fake_array: FakeArrayServer,
    tmp_path: Path,
) -> None:
    with _notes(tmp_path).claim(work.source_event_id):  # another thread or process is attempting it
        result = procedure(array_client, _notes(tmp_path)).attempt(work, deadline=None)
    assert (result.park_reason, result.outcomes, fake_array.calls()) == ("in_flight", [], [])


def test_an_attempt_its_caller_stopped_waiting_for_while_noting_never_sends_the_delete(
    procedure: Callable[..., CleanupProcedure], work: CleanupWork, tmp_path: Path
) -> None:
    sent: list[str] = []
    result = AttemptResult()

    class Notes(LocalDeletionNotes):  # the flush's deadline closes the result while the note is written
        def note(self, source_event_id: str, state: NoteState, detail: str | None = None) -> None:
            super().note(source_event_id, state, detail)
            result.close()

    class Array:
        def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
            sent.append(array_user_id)

    procedure(Array(), Notes(tmp_path / "notes")).attempt(work, deadline=None, result=result)
    assert (sent, result.delete_sent) == ([], False)

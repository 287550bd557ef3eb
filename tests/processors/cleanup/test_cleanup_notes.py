"""processors/cleanup/_notes.py: what the processor did about each expiry, kept on local disk."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from processors.cleanup._notes import LocalDeletionNotes, Note, NoteState


def test_an_expiry_never_attempted_is_noted_as_nothing(tmp_path: Path) -> None:
    assert LocalDeletionNotes(tmp_path / "notes").read("event-1") == Note(NoteState.NONE)


def test_a_note_is_found_by_a_later_process_on_the_same_folder(tmp_path: Path) -> None:
    LocalDeletionNotes(tmp_path / "notes").note("event-1", NoteState.SENDING)
    later = LocalDeletionNotes(tmp_path / "notes")
    assert (later.state("event-1"), later.state("event-2")) == (NoteState.SENDING, NoteState.NONE)


def test_a_final_note_keeps_its_outcome_detail_and_replaces_the_earlier_note(tmp_path: Path) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note("event-1", NoteState.SENDING)
    notes.note("event-1", NoteState.SENT)
    notes.note("event-1", NoteState.GONE, "earlier_attempt")
    read = LocalDeletionNotes(tmp_path / "notes").read("event-1")
    assert (read, read.final) == (Note(NoteState.GONE, "earlier_attempt"), True)


def test_sending_and_sent_are_not_final(tmp_path: Path) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note("event-1", NoteState.SENDING)
    notes.note("event-2", NoteState.SENT)
    assert [notes.read(e).final for e in ("event-1", "event-2")] == [False, False]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", Note(NoteState.DELETED)),  # the first version: written after a 2xx
        (b"sent", Note(NoteState.SENDING)),  # the second: written before the request (write-ahead)
        (b"gone", Note(NoteState.GONE, "404")),  # the second: the first delete answered 404
    ],
    ids=["empty", "sent", "gone"],
)
def test_notes_of_the_earlier_versions_read_as_what_they_meant(
    tmp_path: Path, content: bytes, expected: Note
) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note("event-1", NoteState.SENDING)
    [path] = list((tmp_path / "notes").glob("*.deleted"))
    path.write_bytes(content)
    assert notes.read("event-1") == expected


def test_a_detail_that_is_not_a_short_code_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="short code"):
        LocalDeletionNotes(tmp_path / "notes").note("event-1", NoteState.FAILED, "a sentence with spaces")


def test_notes_are_owner_only_and_hold_no_event_id_and_no_personal_data(tmp_path: Path) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note("event-1", NoteState.SENDING)
    notes.note("event-2", NoteState.GONE, "404")
    with notes.claim("event-1"):
        pass
    paths = sorted((tmp_path / "notes").iterdir())
    assert stat.S_IMODE((tmp_path / "notes").stat().st_mode) == 0o700
    assert [stat.S_IMODE(path.stat().st_mode) for path in paths] == [0o600] * 3
    assert [name for path in paths for name in ("event-1", "event-2") if name in path.name] == []
    notes_only = sorted(path.read_bytes() for path in paths if path.suffix == ".deleted")
    assert notes_only == [b"gone:404", b"sending"]  # a word and a code, nothing else


def test_an_expiry_is_claimed_by_one_attempt_at_a_time(tmp_path: Path) -> None:
    first, second = LocalDeletionNotes(tmp_path / "notes"), LocalDeletionNotes(tmp_path / "notes")
    with first.claim("event-1") as held, second.claim("event-1") as again, second.claim("event-2") as other:
        assert (held, again, other) == (True, False, True)
    with second.claim("event-1") as after:
        assert after


def test_notes_older_than_the_kept_days_are_removed_when_the_notes_are_opened(tmp_path: Path) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note("old", NoteState.SENDING)
    [old] = list((tmp_path / "notes").iterdir())
    notes.note("recent", NoteState.SENDING)
    long_ago = time.time() - 31 * 86_400
    os.utime(old, (long_ago, long_ago))
    reopened = LocalDeletionNotes(tmp_path / "notes", keep_days=30)
    assert (reopened.state("old"), reopened.state("recent")) == (NoteState.NONE, NoteState.SENDING)

"""processors/cleanup/_notes.py: the write-ahead notes of the deletes this processor sent."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from processors.cleanup._notes import LocalDeletionNotes, NoteState


def test_an_expiry_never_sent_is_noted_as_nothing(tmp_path: Path) -> None:
    assert LocalDeletionNotes(tmp_path / "notes").state("event-1") is NoteState.NONE


def test_a_sending_note_is_found_by_a_later_process_on_the_same_folder(tmp_path: Path) -> None:
    LocalDeletionNotes(tmp_path / "notes").note_sending("event-1")
    later = LocalDeletionNotes(tmp_path / "notes")
    assert (later.state("event-1"), later.state("event-2")) == (NoteState.SENT, NoteState.NONE)


def test_a_gone_note_replaces_the_sending_note(tmp_path: Path) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note_sending("event-1")
    notes.note_gone("event-1")
    assert LocalDeletionNotes(tmp_path / "notes").state("event-1") is NoteState.GONE


def test_an_empty_note_of_the_first_version_reads_as_sent(tmp_path: Path) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note_sending("event-1")
    [path] = list((tmp_path / "notes").iterdir())
    path.write_bytes(b"")  # the first version wrote an empty note after a 2xx
    assert notes.state("event-1") is NoteState.SENT


def test_notes_are_owner_only_and_hold_no_event_id_and_no_personal_data(tmp_path: Path) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note_sending("event-1")
    notes.note_gone("event-2")
    paths = sorted((tmp_path / "notes").iterdir())
    assert stat.S_IMODE((tmp_path / "notes").stat().st_mode) == 0o700
    assert [stat.S_IMODE(path.stat().st_mode) for path in paths] == [0o600, 0o600]
    assert [name for path in paths for name in ("event-1", "event-2") if name in path.name] == []
    assert sorted(path.read_bytes() for path in paths) == [b"gone", b"sent"]  # a word, nothing else


def test_notes_older_than_the_kept_days_are_removed_when_the_notes_are_opened(tmp_path: Path) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note_sending("old")
    [old] = list((tmp_path / "notes").iterdir())
    notes.note_sending("recent")
    long_ago = time.time() - 31 * 86_400
    os.utime(old, (long_ago, long_ago))
    reopened = LocalDeletionNotes(tmp_path / "notes", keep_days=30)
    assert (reopened.state("old"), reopened.state("recent")) == (NoteState.NONE, NoteState.SENT)

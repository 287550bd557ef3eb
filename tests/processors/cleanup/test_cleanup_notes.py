"""processors/cleanup/_notes.py: the local notes of the deletes this processor made."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from processors.cleanup import LocalDeletionNotes


def test_a_note_is_found_by_a_later_process_on_the_same_folder(tmp_path: Path) -> None:
    LocalDeletionNotes(tmp_path / "notes").note("event-1")
    later = LocalDeletionNotes(tmp_path / "notes")
    assert later.noted("event-1")
    assert not later.noted("event-2")


def test_notes_are_readable_by_their_owner_only_and_name_no_event(tmp_path: Path) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note("event-1")
    [path] = list((tmp_path / "notes").iterdir())
    assert stat.S_IMODE((tmp_path / "notes").stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "event-1" not in path.name


def test_notes_older_than_the_kept_days_are_removed_when_the_notes_are_opened(tmp_path: Path) -> None:
    notes = LocalDeletionNotes(tmp_path / "notes")
    notes.note("old")
    [old] = list((tmp_path / "notes").iterdir())
    notes.note("recent")
    long_ago = time.time() - 31 * 86_400
    os.utime(old, (long_ago, long_ago))
    reopened = LocalDeletionNotes(tmp_path / "notes", keep_days=30)
    assert not reopened.noted("old")
    assert reopened.noted("recent")

"""pipeline/journal.py: the event journal (a tap for tests and debugging)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pipeline.decode import decode_record
from pipeline.events import StreamEvent
from pipeline.journal import JournalHandler
from tests.pipeline.test_record_processor import RECORD

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"


def _event() -> StreamEvent:
    return decode_record(
        json.dumps(RECORD).encode(), stream_arn=STREAM, shard_id="shard-1", sequence_number="100"
    )


def test_the_journal_file_is_owner_only_in_an_owner_only_folder(tmp_path: Path) -> None:
    journal = JournalHandler(tmp_path / "state" / "journal.jsonl")
    journal.add(_event())
    journal.flush()
    path = tmp_path / "state" / "journal.jsonl"
    assert (os.stat(path).st_mode & 0o777, os.stat(path.parent).st_mode & 0o777) == (0o600, 0o700)


def test_each_flush_appends_the_events_added_since_the_last(tmp_path: Path) -> None:
    journal = JournalHandler(tmp_path / "journal.jsonl")
    for _ in range(2):
        journal.add(_event())
        journal.flush()
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    assert [json.loads(line)["sequence_number"] for line in lines] == ["100", "100"]

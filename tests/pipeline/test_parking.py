"""Parked work: raw records per handler, owner-only, read back as they were parked."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pipeline.parking import ParkedWork, RawRecord

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/1"


def test_a_parked_batch_reads_back_its_records_handler_and_reason(tmp_path: Path) -> None:
    store = ParkedWork(tmp_path)
    path = store.park(
        handler="lake",
        stream_arn=STREAM,
        shard_id="s-1",
        records=[RawRecord(b"a", "1"), RawRecord(b"b", "2")],
        reason="OSError",
    )
    [batch] = list(store)
    assert (batch.path, batch.handler, batch.reason, batch.shard_id) == (path, "lake", "OSError", "s-1")
    assert batch.records == (RawRecord(b"a", "1"), RawRecord(b"b", "2"))


def test_parked_files_are_0600_in_folders_0700(tmp_path: Path) -> None:
    path = ParkedWork(tmp_path / "parked").park(
        handler="lake", stream_arn=STREAM, shard_id="s-1", records=[RawRecord(b"a", "1")], reason="r"
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (path.parent, tmp_path / "parked"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_nothing_to_park_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ParkedWork(tmp_path).park(handler="lake", stream_arn=STREAM, shard_id="s-1", records=[], reason="r")


def test_a_damaged_parked_file_is_skipped_named_and_the_other_batches_read(tmp_path: Path) -> None:
    store = ParkedWork(tmp_path)
    store.park(handler="lake", stream_arn=STREAM, shard_id="s-1", records=[RawRecord(b"a", "1")], reason="r")
    damaged = tmp_path / "lake" / "s-1-2-2.json"
    damaged.write_bytes(b'{"handler": "lake", "records": [{"sequence_number": "2"}]}')
    assert [batch.records for batch in store] == [(RawRecord(b"a", "1"),)]
    assert (store.damaged(), store.count()) == ([damaged], 2)

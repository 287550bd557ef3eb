"""The quarantine: one owner-only file per undecodable record, idempotent, removable."""

from __future__ import annotations

import stat
from pathlib import Path

from pipeline.quarantine import Quarantine

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/1"


def put(store: Quarantine, *, seq: str = "100", reason: str = "not JSON") -> Path:
    return store.put(
        raw=b"\xffraw", reason=reason, stream_arn=STREAM, shard_id="shardId-1", sequence_number=seq
    )


def test_a_quarantined_record_keeps_raw_bytes_reason_position_and_path(tmp_path: Path) -> None:
    store = Quarantine(tmp_path)
    path = put(store)
    [record] = list(store)
    assert (record.raw, record.reason, record.sequence_number, record.path) == (
        b"\xffraw",
        "not JSON",
        "100",
        path,
    )


def test_a_record_quarantined_twice_is_stored_once_and_keeps_the_first(tmp_path: Path) -> None:
    store = Quarantine(tmp_path)
    put(store, reason="first")
    put(store, reason="second")
    assert [record.reason for record in store] == ["first"]


def test_a_removed_record_is_gone_from_the_quarantine(tmp_path: Path) -> None:
    store = Quarantine(tmp_path)
    put(store, seq="100")
    put(store, seq="101")
    store.remove(next(iter(store)))
    assert [record.sequence_number for record in store] == ["101"]


def test_quarantine_files_are_0600_in_folders_0700(tmp_path: Path) -> None:
    path = put(Quarantine(tmp_path / "q"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (path.parent, tmp_path / "q"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_damaged_quarantine_file_is_skipped_named_and_the_others_read(tmp_path: Path) -> None:
    store = Quarantine(tmp_path)
    store.put(raw=b"a", reason="not JSON", stream_arn="arn", shard_id="s-1", sequence_number="1")
    damaged = tmp_path / "s-1" / "damaged.json"
    damaged.write_bytes(b"\xff truncated")
    assert [record.raw for record in store] == [b"a"]
    assert store.damaged() == [damaged]

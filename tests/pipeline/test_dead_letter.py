"""The dead-letter store: one owner-only file per (handler, record), idempotent, removable."""

from __future__ import annotations

import stat
from pathlib import Path

from pipeline.dead_letter import DeadLetters

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/1"


def put(
    store: DeadLetters, *, handler: str = "cleanup", seq: str = "100", reason: str = "no account"
) -> Path:
    return store.put(
        raw=b"\x00raw",
        reason=reason,
        handler=handler,
        stream_arn=STREAM,
        shard_id="shardId-1",
        sequence_number=seq,
    )


def test_a_dead_letter_keeps_raw_bytes_handler_reason_and_position(tmp_path: Path) -> None:
    store = DeadLetters(tmp_path)
    path = put(store)
    [letter] = list(store)
    assert (letter.raw, letter.handler, letter.reason) == (b"\x00raw", "cleanup", "no account")
    assert (letter.stream_arn, letter.shard_id, letter.sequence_number) == (STREAM, "shardId-1", "100")
    assert letter.path == path
    assert letter.dead_lettered_at


def test_a_record_dead_lettered_twice_for_one_handler_is_stored_once_and_keeps_the_first(
    tmp_path: Path,
) -> None:
    store = DeadLetters(tmp_path)
    put(store, reason="first")
    put(store, reason="second")
    assert store.count() == 1
    assert [letter.reason for letter in store] == ["first"]


def test_the_same_record_dead_lettered_by_two_handlers_is_two_letters(tmp_path: Path) -> None:
    store = DeadLetters(tmp_path)
    put(store, handler="cleanup")
    put(store, handler="lake")
    assert sorted(letter.handler for letter in store) == ["cleanup", "lake"]


def test_a_removed_dead_letter_is_gone(tmp_path: Path) -> None:
    store = DeadLetters(tmp_path)
    put(store, seq="100")
    put(store, seq="101")
    store.remove(next(iter(store)))
    assert [letter.sequence_number for letter in store] == ["101"]


def test_dead_letter_files_are_0600_in_folders_0700(tmp_path: Path) -> None:
    path = put(DeadLetters(tmp_path / "dead"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (path.parent, path.parent.parent, tmp_path / "dead"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_an_empty_store_lists_nothing(tmp_path: Path) -> None:
    store = DeadLetters(tmp_path / "never-created")
    assert (list(store), store.count()) == ([], 0)


def test_a_sequence_number_that_is_not_one_never_becomes_a_path(tmp_path: Path) -> None:
    path = put(DeadLetters(tmp_path / "dead"), seq="../../escape")
    assert path.is_relative_to(tmp_path / "dead")


def test_a_damaged_dead_letter_file_is_skipped_named_and_the_others_read(tmp_path: Path) -> None:
    store = DeadLetters(tmp_path)
    store.put(
        raw=b"a",
        reason="no account",
        handler="cleanup",
        stream_arn="arn",
        shard_id="s-1",
        sequence_number="1",
    )
    damaged = tmp_path / "cleanup" / "s-1" / "damaged.json"
    damaged.write_bytes(b'{"raw_base64": "YQ=="}')
    assert [letter.raw for letter in store] == [b"a"]
    assert store.damaged() == [damaged]

"""pipeline/_stored_records.py: the files the quarantine, the dead letters and parked work share, and the
store the quarantine and the dead letters are both built on."""

from __future__ import annotations

import logging
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline._stored_records import (
    base64_field,
    damaged_files,
    read_stored,
    sequence_file_stem,
    store_document,
    text_field,
)
from pipeline.dead_letter import DeadLetter, DeadLetters
from pipeline.quarantine import Quarantine, QuarantinedRecord


def reason_of(path: Path, document: Any) -> str:
    return text_field(document, "reason")


def stored(root: Path, name: str, reason: str = "r") -> Path:
    return store_document(root, root / "shard" / name, raw=b"x", stamp_field="at", reason=reason)


def test_a_damaged_file_is_skipped_and_the_others_are_read(tmp_path: Path) -> None:
    stored(tmp_path, "1.json", "first")
    (tmp_path / "shard" / "2.json").write_bytes(b"{not json")
    stored(tmp_path, "3.json", "third")
    assert list(read_stored(tmp_path, "*/*.json", reason_of)) == ["first", "third"]


def test_a_skipped_file_is_logged_by_its_path_and_error_class_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    damaged = tmp_path / "shard" / "2.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b'{"reason": 7, "secret": "user-42"}')
    with caplog.at_level(logging.WARNING):
        assert list(read_stored(tmp_path, "*/*.json", reason_of)) == []
    [entry] = caplog.records
    assert (entry.path, entry.error) == (str(damaged), "TypeError")  # type: ignore[attr-defined]
    assert "user-42" not in caplog.text


def test_damaged_files_names_each_file_that_cannot_be_read(tmp_path: Path) -> None:
    stored(tmp_path, "1.json")
    (tmp_path / "shard" / "2.json").write_bytes(b"[]")
    (tmp_path / "shard" / "3.json").write_bytes(b"{}")
    assert damaged_files(tmp_path, "*/*.json", reason_of) == [
        tmp_path / "shard" / "2.json",
        tmp_path / "shard" / "3.json",
    ]


def test_a_field_that_is_not_text_or_not_strict_base64_is_damage() -> None:
    with pytest.raises(TypeError):
        text_field({"reason": None}, "reason")
    with pytest.raises(ValueError):
        base64_field({"raw_base64": "not base64!"}, "raw_base64")


def test_a_record_stored_twice_keeps_the_first_file(tmp_path: Path) -> None:
    path = stored(tmp_path, "1.json", "first")
    assert stored(tmp_path, "1.json", "second") == path
    assert list(read_stored(tmp_path, "*/*.json", reason_of)) == ["first"]


def test_a_file_stem_sorts_like_the_sequence_number_and_never_trusts_other_text() -> None:
    assert sequence_file_stem("9") < sequence_file_stem("10")
    assert "/" not in sequence_file_stem("../../etc/passwd")


# -- the two stores built on RecordStore: the quarantine (by shard) and the dead letters (by handler) --

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/1"


@dataclass(frozen=True)
class Kind:
    """One store, how to put a record in it, and how many folders deep its files are."""

    name: str
    open: Callable[[Path], Quarantine | DeadLetters]
    depth: int

    def put(
        self,
        store: Quarantine | DeadLetters,
        *,
        seq: str = "100",
        reason: str = "r",
        handler: str = "cleanup",
    ) -> Path:
        position = {"stream_arn": STREAM, "shard_id": "shardId-1", "sequence_number": seq}
        if isinstance(store, DeadLetters):
            return store.put(raw=b"\x00raw", reason=reason, handler=handler, **position)
        return store.put(raw=b"\x00raw", reason=reason, **position)


KINDS = [Kind("quarantine", Quarantine, 1), Kind("dead-letter", DeadLetters, 2)]


@pytest.fixture(params=KINDS, ids=lambda kind: kind.name)
def kind(request: pytest.FixtureRequest) -> Kind:
    chosen: Kind = request.param
    return chosen


def test_a_stored_record_keeps_raw_bytes_reason_position_path_and_when(kind: Kind, tmp_path: Path) -> None:
    store = kind.open(tmp_path)
    path = kind.put(store, reason="not JSON")
    [record] = list(store)
    assert (record.raw, record.reason, record.stream_arn, record.shard_id) == (
        b"\x00raw",
        "not JSON",
        STREAM,
        "shardId-1",
    )
    assert (record.sequence_number, record.path) == ("100", path)
    assert isinstance(record, DeadLetter | QuarantinedRecord)
    stamp = record.dead_lettered_at if isinstance(record, DeadLetter) else record.quarantined_at
    assert datetime.fromisoformat(stamp).tzinfo is not None


def test_a_record_stored_twice_in_a_store_is_one_file_keeping_the_first(kind: Kind, tmp_path: Path) -> None:
    store = kind.open(tmp_path)
    kind.put(store, reason="first")
    kind.put(store, reason="second")
    assert (store.count(), [record.reason for record in store]) == (1, ["first"])


def test_a_removed_record_is_gone_from_its_store(kind: Kind, tmp_path: Path) -> None:
    store = kind.open(tmp_path)
    kind.put(store, seq="100")
    kind.put(store, seq="101")
    store.remove(next(iter(store)))  # type: ignore[arg-type]  # each store takes its own record type
    assert [record.sequence_number for record in store] == ["101"]


def test_a_stores_files_are_0600_in_folders_0700(kind: Kind, tmp_path: Path) -> None:
    path = kind.put(kind.open(tmp_path / "store"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in [*path.parents[: kind.depth], tmp_path / "store"]:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_store_never_created_lists_nothing(kind: Kind, tmp_path: Path) -> None:
    store = kind.open(tmp_path / "never-created")
    assert (list(store), store.count(), store.damaged()) == ([], 0, [])


def test_a_sequence_number_that_is_not_one_never_becomes_a_path(kind: Kind, tmp_path: Path) -> None:
    assert kind.put(kind.open(tmp_path / "store"), seq="../../escape").is_relative_to(tmp_path / "store")


def test_a_damaged_file_in_a_store_is_skipped_named_and_the_others_read(kind: Kind, tmp_path: Path) -> None:
    store = kind.open(tmp_path)
    path = kind.put(store)
    damaged = path.parent / "damaged.json"
    damaged.write_bytes(b'{"raw_base64": "YQ=="}')  # fields missing
    assert [record.raw for record in store] == [b"\x00raw"]
    assert store.damaged() == [damaged]


def test_the_same_record_dead_lettered_by_two_handlers_is_two_letters(tmp_path: Path) -> None:
    store = DeadLetters(tmp_path)
    dead_letters = KINDS[1]
    dead_letters.put(store, handler="cleanup")
    dead_letters.put(store, handler="lake")
    assert sorted(letter.handler for letter in store) == ["cleanup", "lake"]

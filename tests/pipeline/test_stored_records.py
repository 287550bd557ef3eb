"""pipeline/_stored_records.py: the files the quarantine, the dead letters and parked work share."""

from __future__ import annotations

import logging
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

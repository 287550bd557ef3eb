"""schema/_files.py: the one atomic, owner-only write."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

import pytest

from schema._files import append_private_file, private_dir, write_private, write_private_file


def _mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


def test_a_written_file_is_owner_only(tmp_path: Path) -> None:
    write_private_file(tmp_path / "state" / "a.json", b"{}")
    assert _mode(tmp_path / "state" / "a.json") == 0o600


def test_every_folder_it_creates_is_owner_only(tmp_path: Path) -> None:
    write_private_file(tmp_path / "var" / "quarantine" / "shard" / "1.json", b"{}")
    assert [_mode(tmp_path / p) for p in ("var", "var/quarantine", "var/quarantine/shard")] == [0o700] * 3


def test_a_folder_that_existed_before_it_is_left_as_it_was(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    private_dir(shared / "mine")
    assert (_mode(shared), _mode(shared / "mine")) == (0o755, 0o700)


def test_the_target_folder_is_tightened_when_it_was_looser(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    folder.chmod(0o755)
    write_private_file(folder / "a.json", b"{}")
    assert _mode(folder) == 0o700


def test_a_rewrite_replaces_the_whole_file(tmp_path: Path) -> None:
    write_private_file(tmp_path / "a", b"first, longer")
    write_private_file(tmp_path / "a", b"second")
    assert (tmp_path / "a").read_bytes() == b"second"


def test_a_write_that_dies_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    write_private_file(tmp_path / "a", b"old")

    def dies(out: BinaryIO) -> None:
        out.write(b"half")
        raise RuntimeError("the writer died")

    with pytest.raises(RuntimeError):
        write_private(tmp_path / "a", dies)
    assert ((tmp_path / "a").read_bytes(), sorted(p.name for p in tmp_path.iterdir())) == (b"old", ["a"])


def test_write_private_returns_what_the_writer_returned(tmp_path: Path) -> None:
    assert write_private(tmp_path / "a", lambda out: out.write(b"four")) == 4


def test_an_append_adds_to_the_end_of_an_owner_only_file(tmp_path: Path) -> None:
    append_private_file(tmp_path / "j" / "journal.jsonl", b"1\n")
    append_private_file(tmp_path / "j" / "journal.jsonl", b"2\n")
    path = tmp_path / "j" / "journal.jsonl"
    assert (path.read_bytes(), _mode(path), _mode(path.parent)) == (b"1\n2\n", 0o600, 0o700)


def test_an_append_tightens_an_older_looser_file(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"1\n")
    path.chmod(0o644)
    append_private_file(path, b"2\n")
    assert _mode(path) == 0o600

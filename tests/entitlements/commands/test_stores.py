"""entitlements/commands/_stores.py: what the consumer-store commands share."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import typer

from entitlements.commands._stores import exit_if_damaged, one_line_errors, print_counts, print_report
from pipeline.quarantine import Quarantine
from pipeline.recovery import RecoveryReport
from schema.errors import TerminalError


def test_counts_print_a_total_then_each_reason_most_first(capsys: pytest.CaptureFixture[str]) -> None:
    print_counts("dead letters", Counter({("cleanup", "no account"): 1, ("cleanup", "empty id"): 3}))
    assert capsys.readouterr().out.splitlines() == [
        "dead letters: 4 records",
        "       3  cleanup  empty id",
        "       1  cleanup  no account",
    ]


def test_a_report_prints_finished_remaining_and_failures_by_store_and_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_report(
        "re-driven", RecoveryReport(2, 1, Counter({("quarantine", "DecodeError"): 1})), "still quarantined"
    )
    assert capsys.readouterr().out.splitlines() == [
        "re-driven 2; 1 still quarantined",
        "       1  quarantine  DecodeError",
    ]


def test_an_error_the_operator_can_act_on_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as raised, one_line_errors("quarantine list"):
        raise TerminalError("the state folder is not a folder")
    assert raised.value.exit_code == 1
    assert capsys.readouterr().err == "quarantine list: TerminalError: the state folder is not a folder\n"


def test_a_store_without_damaged_files_lets_the_command_go_on_silently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Quarantine(tmp_path).put(raw=b"x", reason="not JSON", stream_arn="arn", shard_id="s", sequence_number="1")
    exit_if_damaged("quarantine list", Quarantine(tmp_path))
    assert capsys.readouterr().err == ""


def test_more_than_five_damaged_files_are_named_five_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s").mkdir()
    for n in range(7):
        (tmp_path / "s" / f"{n}.json").write_bytes(b"")
    with pytest.raises(typer.Exit):
        exit_if_damaged("quarantine list", Quarantine(tmp_path))
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("quarantine list: 7 damaged files skipped, left in place: ")
    assert line.endswith(f"{tmp_path / 's' / '4.json'} and 2 more")

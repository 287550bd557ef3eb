"""entitlements/commands/_stores.py: what the consumer-store commands share."""

from __future__ import annotations

import json
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from entitlements.cli import app as cli
from entitlements.commands._stores import exit_if_damaged, one_line_errors, print_counts, print_report
from pipeline.quarantine import Quarantine
from pipeline.recovery import RecoveryReport
from schema.errors import TerminalError
from tests.entitlements.commands._stored import StateDir


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


# -- `quarantine` and `dead-letter` list and export: one implementation (store_commands), both groups --

cli_runner = CliRunner()


@dataclass(frozen=True)
class Group:
    command: str
    store_folder: str
    put: Callable[[StateDir, bytes], None]
    depth: int  # folders between the store's root and a record's file


GROUPS = [
    Group("quarantine", "quarantine", lambda state, raw: state.quarantined(raw), 1),
    Group("dead-letter", "dead-letter", lambda state, raw: state.dead_lettered(raw), 2),
]


@pytest.fixture(params=GROUPS, ids=lambda group: group.command)
def group(request: pytest.FixtureRequest) -> Group:
    chosen: Group = request.param
    return chosen


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state")


def entitlements(state: StateDir, *args: str) -> Result:
    """The command as a user runs it: through the CLI's root, which turns errors into one line."""
    return cli_runner.invoke(cli, list(args), env=state.env)


def test_list_never_prints_a_records_content(group: Group, state: StateDir) -> None:
    group.put(state, b"secret-user-id")
    result = entitlements(state, group.command, "list")
    assert result.exit_code == 0
    assert "secret" not in result.stdout + result.stderr


def test_list_names_a_damaged_file_on_one_line_and_exits_1(group: Group, state: StateDir) -> None:
    group.put(state, b"x")
    [stored] = (state.root / group.store_folder).glob("/".join(["*"] * group.depth + ["*.json"]))
    damaged = stored.parent / "damaged.json"
    damaged.write_bytes(b"not json")
    result = entitlements(state, group.command, "list")
    assert (result.exit_code, result.stdout.splitlines()[0].endswith(": 1 record")) == (1, True)
    assert result.stderr.splitlines() == [
        f"{group.command} list: 1 damaged file skipped, left in place: {damaged}"
    ]


def test_a_store_the_user_cannot_read_is_one_line_naming_it_and_the_variable_exit_2(
    group: Group, state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    group.put(state, b"x")
    store = state.root / group.store_folder
    read_bytes = Path.read_bytes

    def refused(path: Path) -> bytes:  # as for another user's 0600 file (the tests may run as root)
        if path.is_relative_to(store):
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", refused)
    result = entitlements(state, group.command, "list")
    [line] = result.stderr.splitlines()
    assert (result.exit_code, line.startswith("entitlements: cannot read the ")) == (2, True)
    assert (
        f"{store}/" in line and "(Permission denied)" in line and "ENTITLEMENTS_CONSUMER__STATE_DIR" in line
    )


def test_a_state_folder_that_is_not_there_is_one_line_naming_it_and_the_variable_exit_2(
    group: Group, tmp_path: Path
) -> None:
    state = StateDir(tmp_path / "state")
    result = entitlements(state, group.command, "list")
    [line] = result.stderr.splitlines()
    assert (result.exit_code, result.stdout) == (2, "")
    assert line.startswith(f"entitlements: the consumer's state folder {state.root} ")
    assert line.endswith(
        "set ENTITLEMENTS_CONSUMER__STATE_DIR to the folder `entitlements consume` keeps its state in"
    )


def test_a_state_folder_that_is_a_file_is_refused_by_the_settings_in_one_line_exit_2(
    group: Group, tmp_path: Path
) -> None:
    state = StateDir(tmp_path / "state")
    state.root.write_text("not a folder")
    result = entitlements(state, group.command, "list")
    [line] = result.stderr.splitlines()
    assert (result.exit_code, result.stdout) == (2, "")
    assert line == (
        "entitlements: settings refused: ENTITLEMENTS_CONSUMER__STATE_DIR: not_a_folder: names a file, "
        "not a folder: name a folder (it is made if missing)"
    )
    assert state.root.read_text() == "not a folder"  # nothing touched


def test_export_writes_every_record_to_a_new_owner_only_file(
    group: Group, state: StateDir, tmp_path: Path
) -> None:
    group.put(state, b"raw")
    destination = tmp_path / "out.jsonl"
    result = entitlements(state, group.command, "export", str(destination))
    assert (result.exit_code, result.stdout.startswith("exported 1 ")) == (0, True)
    assert stat.S_IMODE(destination.stat().st_mode) == 0o600
    assert [json.loads(line)["raw_base64"] for line in destination.read_text().splitlines()] == ["cmF3"]


def test_export_to_an_existing_file_is_one_line_exit_2_and_the_file_kept(
    group: Group, state: StateDir, tmp_path: Path
) -> None:
    group.put(state, b"raw")
    destination = tmp_path / "out.jsonl"
    destination.write_text("keep")
    result = entitlements(state, group.command, "export", str(destination))
    assert (result.exit_code, result.stderr.splitlines()) == (
        2,
        [f"entitlements: {destination} exists: an export never overwrites a file; name a new one"],
    )
    assert destination.read_text() == "keep"


def test_export_into_a_missing_folder_is_one_line_naming_the_file_exit_2(
    group: Group, state: StateDir, tmp_path: Path
) -> None:
    group.put(state, b"raw")
    destination = tmp_path / "no-such-folder" / "out.jsonl"
    result = entitlements(state, group.command, "export", str(destination))
    [line] = result.stderr.splitlines()
    assert (result.exit_code, line.startswith(f"entitlements: cannot write the export {destination}")) == (
        2,
        True,
    )


def test_redrive_with_nothing_stored_needs_no_handler_and_no_aws(group: Group, state: StateDir) -> None:
    state.root.mkdir(parents=True)
    env = {**state.env, "ENTITLEMENTS_AWS__ENDPOINT_URL": "http://127.0.0.1:9"}  # nothing listens there
    result = cli_runner.invoke(cli, [group.command, "redrive"], env=env)
    assert (result.exit_code, result.stdout.startswith("re-driven 0; 0 still ")) == (0, True)

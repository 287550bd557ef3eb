"""`entitlements erasure validate FILE|-`: one verdict per line, never the body."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from entitlements.cli import app as root
from entitlements.commands.erasure import app

CANARY = "canary-7c1d0e"
ERASE = json.dumps(
    {
        "type": "erasure/ERASE",
        "requestId": CANARY,
        "sendNo": 1,
        "expiresAt": "2099-01-01T00:00:00.000Z",
        "keyKind": "ADDRESS",
        "key": f"{CANARY}@example.com",
    }
)
ACK = json.dumps(
    {"type": "erasure/ACK", "requestId": CANARY, "sendNo": 1, "subscriber": "space", "outcome": "DONE"}
)
INVALID = json.dumps({"type": "erasure/ERASE", "requestId": CANARY})
runner = CliRunner()


def _write(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "messages.jsonl"
    path.write_bytes(data)
    return str(path)


def test_each_line_gets_its_number_and_verdict(tmp_path: Path) -> None:
    lines = [ERASE, f"{{{CANARY}", INVALID, ACK]
    result = runner.invoke(app, ["validate", _write(tmp_path, "\n".join(lines).encode() + b"\n")])
    assert result.output.splitlines() == [
        "1: accepted erasure/ERASE",
        "2: NOT_JSON",
        "3: INVALID_MESSAGE $.sendNo: required; $.expiresAt: required; $.keyKind: required; $.key: required",
        "4: NOT_A_REQUEST erasure/ACK",
        "4 messages, 1 accepted, 3 refused",
    ]


def test_it_exits_1_when_any_line_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", _write(tmp_path, f"{ERASE}\n{ACK}\n".encode())])
    assert result.exit_code == 1


def test_it_exits_0_when_every_line_is_accepted(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", _write(tmp_path, f"{ERASE}\r\n{ERASE}\n".encode())])
    assert result.exit_code == 0
    assert result.output.splitlines()[-1] == "2 messages, 2 accepted, 0 refused"


def test_it_never_prints_a_body(tmp_path: Path) -> None:
    data = (
        "\n".join([ERASE, ACK, INVALID, f"{{{CANARY}", CANARY]).encode() + b"\n" + CANARY.encode() + b"\xff\n"
    )
    result = runner.invoke(app, ["validate", _write(tmp_path, data)])
    assert CANARY not in result.output
    assert CANARY not in (result.stderr or "")


def test_dash_reads_standard_input() -> None:
    result = runner.invoke(app, ["validate", "-"], input=f"{ERASE}\n")
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == "1: accepted erasure/ERASE"


def test_invalid_utf8_on_a_line_is_not_json(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", _write(tmp_path, ERASE.encode()[:-2] + b'\xff"}\n')])
    assert result.output.splitlines()[0] == "1: NOT_JSON"


def test_empty_lines_are_skipped_but_counted_in_line_numbers(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", _write(tmp_path, f"\n{ERASE}\n\n".encode())])
    assert result.output.splitlines() == ["2: accepted erasure/ERASE", "1 messages, 1 accepted, 0 refused"]
    assert result.exit_code == 0


def test_the_group_is_registered_on_the_entitlements_command() -> None:
    result = runner.invoke(root, ["erasure", "validate", "-"], input=f"{INVALID}\n")
    assert result.exit_code == 1
    assert result.output.splitlines()[0].startswith("1: INVALID_MESSAGE $.sendNo: required")


def test_an_invalid_message_gets_each_refusals_json_path_and_rule_never_its_value(tmp_path: Path) -> None:
    message = {**json.loads(ERASE), "sendNo": 0, "expiresAt": CANARY, "keyKind": CANARY}
    result = runner.invoke(app, ["validate", _write(tmp_path, json.dumps(message).encode() + b"\n")])
    assert result.output.splitlines()[0] == (
        "1: INVALID_MESSAGE $.sendNo: minimum 1; $.expiresAt: format of $defs/utcTime; "
        "$.expiresAt: pattern of $defs/utcTime; $.keyKind: one of (ACCOUNT, ADDRESS)"
    )
    assert CANARY not in result.output


def test_a_field_the_message_type_does_not_list_is_named_when_its_name_is_plain(tmp_path: Path) -> None:
    message = {**json.loads(ERASE), "note": CANARY, f"{CANARY} x": 1}
    result = runner.invoke(app, ["validate", _write(tmp_path, json.dumps(message).encode() + b"\n")])
    assert result.output.splitlines()[0] == (
        "1: INVALID_MESSAGE $.note: unknown field (additionalProperties); "
        "$.<field>: unknown field (additionalProperties)"
    )
    assert CANARY not in result.output

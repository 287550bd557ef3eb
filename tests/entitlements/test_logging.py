"""entitlements/_logging.py: the entry points' log, one JSON object per line on stderr."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from entitlements._logging import configure_logging


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout is never used (the KCL child's protocol channel)
    return captured.err.splitlines()


def _entries(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _lines(capsys)]


def test_a_message_logged_with_arguments_is_rendered_without_placeholders(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging()
    logging.getLogger("some.library").info("found credentials in %s after %d tries", "env", 2)
    [entry] = _entries(capsys)
    assert entry["msg"] == "found credentials in env after 2 tries"


def test_each_record_is_one_line_at_its_own_level_even_with_a_newline_in_its_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging()
    logging.getLogger("pipeline.x").warning("first\nsecond", extra={"count": 3})
    logging.getLogger("pipeline.x").error("third")
    entries = _entries(capsys)
    assert [(e["level"], e["logger"], e["msg"], e.get("count")) for e in entries] == [
        ("WARNING", "pipeline.x", "first\nsecond", 3),
        ("ERROR", "pipeline.x", "third", None),
    ]


def test_an_exception_is_named_by_its_class_never_its_message(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging()
    try:
        raise KeyError("user-canary-42")
    except KeyError:
        logging.getLogger("pipeline.x").exception("lookup failed")
    [line] = _lines(capsys)
    assert (json.loads(line)["exception"], "user-canary-42" in line, "Traceback" in line) == (
        "KeyError",
        False,
        False,
    )


def test_arguments_that_do_not_fit_the_template_leave_the_template(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging()
    template = "%s and %s"  # a library's mistake: its template wants more arguments than it passed
    logging.getLogger("some.library").info(template, "only one")
    [entry] = _entries(capsys)
    assert entry["msg"] == template


def test_an_object_logged_as_the_message_is_named_by_its_type_never_its_repr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging()
    logging.getLogger("some.library").info({"userId": "user-canary-42"})
    [line] = _lines(capsys)
    assert (json.loads(line)["msg"], "user-canary-42" in line) == ("dict", False)


def test_a_level_below_the_configured_one_is_not_written(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("WARNING")
    logging.getLogger("pipeline.x").info("quiet")
    assert _lines(capsys) == []


@pytest.mark.parametrize("library", ["httpx", "werkzeug", "uvicorn.access"])
def test_a_librarys_request_line_naming_a_path_is_not_written_at_info(
    library: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An in-process uvicorn with access_log=False (an earlier test's service) stops its access logger
    # propagating; this test is about the level configure_logging sets, so it starts from a propagating one.
    monkeypatch.setattr(logging.getLogger(library), "propagate", True)
    configure_logging()
    logging.getLogger(library).info("HTTP Request: %s %s", "POST", "http://127.0.0.1/user-canary-42/signup")
    logging.getLogger(library).warning("connection pool is full")
    assert [entry["msg"] for entry in _entries(capsys)] == ["connection pool is full"]


def test_uvicorns_coloured_copy_of_its_template_is_left_out(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_logging()
    # An in-process uvicorn started earlier in this process (devstack's service runner, log_level
    # "warning") leaves this logger at WARNING; the formatter is what is under test here.
    monkeypatch.setattr(logging.getLogger("uvicorn.error"), "level", logging.NOTSET)
    # As uvicorn logs its start: the template, its arguments and a coloured, unfilled copy of it.
    coloured = "Started server process [\x1b[36m%d\x1b[0m]"
    logging.getLogger("uvicorn.error").info(
        "Started server process [%d]", 4242, extra={"color_message": coloured}
    )
    [line] = _lines(capsys)
    assert json.loads(line)["msg"] == "Started server process [4242]"
    assert "color_message" not in line and "%d" not in line and "\\u001b" not in line


@pytest.mark.parametrize("library", ["botocore.credentials", "boto3", "urllib3", "s3transfer"])
def test_the_aws_sdks_info_lines_are_not_written_and_its_warnings_are(
    library: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # botocore says where it found credentials at INFO once per session: beside a command's refusal it
    # was a second stderr line.
    configure_logging()
    logging.getLogger(library).info("Found credentials in environment variables.")
    logging.getLogger(library).warning("retries exhausted")
    assert [entry["msg"] for entry in _entries(capsys)] == ["retries exhausted"]

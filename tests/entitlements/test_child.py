"""entitlements/child.py: the KCL child's main() (settings -> compose -> kclpy), without the daemon."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from entitlements.child import _KclpyErrors

CANARY = "canary-7f3a-secret-value"
REPO = Path(__file__).resolve().parents[2]


def _run_child(environ: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """The child started as the daemon starts it, with nothing on its stdin."""
    return subprocess.run(
        [sys.executable, "-m", "entitlements.child"],
        cwd=REPO,
        env=environ,
        input=b"",
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_a_mistyped_secret_stops_the_child_with_the_field_and_never_the_value() -> None:
    environ = {**os.environ, "ENTITLEMENTS_ARRAY__TIMEOUT_SECONDS": CANARY}
    done = _run_child(environ)
    assert (done.returncode, done.stdout) == (2, b"")
    assert b"ENTITLEMENTS_ARRAY__TIMEOUT_SECONDS: float_parsing" in done.stderr
    assert CANARY.encode() not in done.stderr


def test_a_refusing_child_writes_one_json_object_per_line_at_critical() -> None:
    environ = {**os.environ, "ENTITLEMENTS_ARRAY__TIMEOUT_SECONDS": CANARY}
    done = _run_child(environ)
    entries = [json.loads(line) for line in done.stderr.decode().splitlines()]
    assert [(entry["level"], entry["logger"], entry["msg"]) for entry in entries] == [
        ("CRITICAL", "entitlements.child", "child refused to start")
    ]


def test_a_child_stopped_by_an_uncaught_exception_says_so_in_one_json_line_naming_its_class(
    tmp_path: Path,
) -> None:
    environ = {
        **os.environ,
        "ENTITLEMENTS_AWS__ENDPOINT_URL": "http://127.0.0.1:1",  # nothing listens: every call fails
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": "testing",
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": "testing",
        "ENTITLEMENTS_CONSUMER__STREAM_ARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/x",
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state"),
    }
    done = _run_child(environ)
    lines = done.stderr.decode().splitlines()
    [last] = [json.loads(line) for line in lines][-1:]
    assert (done.returncode != 0, "Traceback" in done.stderr.decode(), last["level"], "error" in last) == (
        True,
        False,
        "CRITICAL",
        True,
    )


def test_an_exception_kclpy_reports_is_one_error_line_naming_its_class_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    errors = _KclpyErrors()
    try:
        raise ValueError("user-canary-42")
    except ValueError as caught:
        # What kclpy does with an exception an action raised.
        errors.write(f"Caught exception from action dispatch: {caught}")
        errors.write("Traceback (most recent call last): ...")
        errors.flush()
    assert [(r.levelno, r.getMessage(), r.__dict__["error"]) for r in caplog.records] == [
        (logging.ERROR, "kclpy caught an exception from an action", "ValueError")
    ]


def test_the_child_loads_no_cli_module_at_run_time() -> None:
    prefixes = ("entitlements.commands", "entitlements.cli", "typer")
    probe = (
        f"import sys, entitlements.child; print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, timeout=120, check=True
    )
    assert done.stdout.strip() == b"[]"


def test_the_child_loads_neither_the_lake_committer_nor_duckdb() -> None:
    # What main() imports. A child commits through its worker's writer: the planner (delta-rs,
    # pyarrow.dataset) and the lake's readers (DuckDB) are the writer's and the CLI's, and would cost
    # every child about 50 MB and 0.15 CPU s at each start (a restart starts one per shard).
    heavy = ("deltalake", "duckdb", "pyarrow.dataset", "analytics.lake._commits", "analytics.lake.views")
    probe = (
        "import sys; from amazon_kclpy import kcl; import telemetry, config, pipeline; "
        "from entitlements import compose; "
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, timeout=120, check=True
    )
    assert done.stdout.strip() == b"[]"


def test_a_child_whose_retry_queue_is_missing_stops_naming_the_setup_command(
    moto_endpoint: str, tmp_path: Path
) -> None:
    environ = {
        **os.environ,
        "ENTITLEMENTS_AWS__ENDPOINT_URL": moto_endpoint,
        # A region no other test uses: moto keeps queues per region, so no retry queue exists there.
        "ENTITLEMENTS_AWS__REGION": "ap-southeast-2",
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": "testing",
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": "testing",
        "ENTITLEMENTS_CONSUMER__STREAM_ARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/x",
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state"),
    }
    done = _run_child(environ)
    assert (done.returncode, done.stdout) == (2, b"")
    assert b"run `entitlements cleanup setup` first" in done.stderr

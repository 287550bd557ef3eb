"""`entitlements consume` and its metrics: a metrics port in use, or a state folder another consumer
holds, stops it before any daemon starts, with one line naming the address or folder and the way out."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.telemetry._holder import holding

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"


def consume(state_dir: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(state_dir),
        "ENTITLEMENTS_AWS__ENDPOINT_URL": "http://127.0.0.1:9",
        **variables,
    }
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from entitlements.cli import main; main()",
            "consume",
            "--stream-arn",
            STREAM,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_metrics_port_in_use_stops_consume_with_one_line_naming_the_address_and_the_setting(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = consume(tmp_path / "state", ENTITLEMENTS_METRICS__CONSUME_PORT=str(port))
    [line] = done.stderr.splitlines()
    assert done.returncode == 2
    assert f"127.0.0.1:{port}" in line
    assert "ENTITLEMENTS_METRICS__CONSUME_PORT" in line


def test_a_state_folder_another_consumer_holds_stops_consume_with_one_line_naming_it(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    with holding(state_dir):
        done = consume(state_dir)
    [line] = done.stderr.splitlines()
    assert done.returncode == 2
    assert f"a consumer already runs on the state folder {state_dir}" in line

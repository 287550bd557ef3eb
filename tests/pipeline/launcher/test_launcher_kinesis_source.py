"""The launcher's Kinesis source: the properties the Python side writes for each source kind
(pipeline/daemon.py), and the launcher refusing a Kinesis source it cannot read (no JVM reaches AWS)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from config import load_settings
from pipeline.daemon import launcher_properties

REPO = Path(__file__).resolve().parents[3]
JAR = REPO / "pipeline" / "launcher" / "target" / "entitlements-kcl-launcher.jar"

DYNAMODB_STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"
KINESIS_STREAM = "arn:aws:kinesis:eu-west-1:123456789012:stream/entitlements-changes"


def _properties(**overrides: Any) -> dict[str, str]:
    settings = load_settings(
        aws={"endpoint_url": "http://127.0.0.1:5000", "region": "eu-west-1"},
        consumer={"application_name": "app"},
        **overrides,
    )
    text = launcher_properties(settings, stream_arn=DYNAMODB_STREAM, worker_id="w1", child_command="child")
    return dict(line.split(" = ", 1) for line in text.splitlines())


def test_the_kinesis_source_is_written_with_its_stream_its_endpoint_and_an_application_of_its_own() -> None:
    properties = _properties(source={"kind": "kinesis", "stream_arn": KINESIS_STREAM})
    assert {key: properties.get(key) for key in ("sourceKind", "kinesisStreamArn", "kinesisEndpoint")} == {
        "sourceKind": "kinesis",
        "kinesisStreamArn": KINESIS_STREAM,
        "kinesisEndpoint": "http://127.0.0.1:5000",
    }
    assert (properties["applicationName"], "streamArn" in properties) == ("app-kinesis", False)


def test_the_dynamodb_streams_source_is_written_as_before_with_no_kinesis_keys() -> None:
    properties = _properties()
    assert (properties["sourceKind"], properties["streamArn"], properties["applicationName"]) == (
        "dynamodb-streams",
        DYNAMODB_STREAM,
        "app",
    )
    assert not {"kinesisStreamArn", "kinesisEndpoint"} & properties.keys()


@pytest.mark.skipif(not JAR.exists(), reason="the launcher is not built (make setup)")
def test_a_kinesis_source_without_its_stream_is_refused_before_any_client_is_built(tmp_path: Path) -> None:
    config = tmp_path / "launcher.properties"
    config.write_text(
        "executableName = true\napplicationName = app\nregionName = eu-west-1\nsourceKind = kinesis\n"
    )
    log = tmp_path / "kcl.log"
    done = subprocess.run(
        ["java", "-jar", str(JAR), str(config)],
        env={**os.environ, "KCL_LOG_FILE": str(log)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    [line] = done.stderr.splitlines()
    # The launcher's lines name the exception's class only (a message can carry data).
    assert (done.returncode, json.loads(line)["exception"]) == (1, "java.lang.IllegalArgumentException")
    assert "Starting worker" not in log.read_text()

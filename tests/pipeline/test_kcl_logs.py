"""The consumer's logs through the real daemon (pipeline/daemon.py, the launcher's logback.xml): each
line a child writes reaches the log stream once, as the JSON object the child wrote, at its own level;
KCL's own lines are JSON in their own rotated file, with no child line wrapped into it and without the
leader status line KCL logs every second (lowered below the default level)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.daemon import DaemonSpec, KclDaemon
from tests.support.kcl import dynamodb, running_consumer

pytestmark = pytest.mark.kcl


def _objects(lines: list[str]) -> list[dict[str, Any]]:
    objects = [json.loads(line) for line in lines]
    assert all(isinstance(entry, dict) for entry in objects)
    return objects


def test_a_childs_line_reaches_the_log_stream_once_as_one_json_object_at_its_own_level(
    moto_endpoint: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with running_consumer(moto_endpoint, tmp_path / "state", worker_id="") as consumer:
        spec = DaemonSpec.from_settings(
            consumer.settings,
            stream_arn=consumer.stream_arn,
            worker_id="worker-1",
            work_dir=consumer.settings.consumer.state_dir / "daemon",
        )
        # As `consume` runs it: the children's lines go to this process's stderr.
        daemon = KclDaemon(dataclasses.replace(spec, children_log_path=None))
        consumer.daemons["worker-1"] = daemon
        daemon.start()
        dynamodb(moto_endpoint).put_item(
            TableName=consumer.settings.consumer.table_name,
            Item={"pk": {"S": "USER#u-logs"}, "sk": {"S": "ENTITLEMENT#acct-1"}, "status": {"S": "Active"}},
        )
        consumer.wait_for(lambda events: len(events) >= 1)
    assert spec.log_path is not None
    stream = _objects(capfd.readouterr().err.splitlines())
    kcl_log = _objects(spec.log_path.read_text().splitlines())
    started = [entry for entry in stream if entry["msg"] == "shard consumer started"]
    wrapped = [entry for entry in kcl_log if "shard consumer started" in entry["msg"]]
    assert ([(e["level"], e["logger"]) for e in started], wrapped) == (
        [("INFO", "pipeline.shard_consumer")],
        [],
    )


def test_kcls_own_log_is_json_rotated_and_without_the_leader_status_lines(
    moto_endpoint: str, tmp_path: Path
) -> None:
    overrides = {"kcl_log_max_bytes": 16384, "kcl_log_backups": 2}
    with running_consumer(moto_endpoint, tmp_path / "state", consumer=overrides) as consumer:
        daemon_dir = consumer.settings.consumer.state_dir / "daemon"
        deadline = time.monotonic() + 180
        while not (daemon_dir / "daemon-worker-1.log.1").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)  # several scheduler loops, each of which asks who the leader is
    files = sorted(path.name for path in daemon_dir.glob("daemon-worker-1.log*"))
    entries = [
        entry
        for path in daemon_dir.glob("daemon-worker-1.log*")
        for entry in _objects(path.read_text().splitlines())
    ]
    leader_status = [entry for entry in entries if "is the current leader" in entry["msg"]]
    assert (files[:2], len(files) <= 3, leader_status) == (
        ["daemon-worker-1.log", "daemon-worker-1.log.1"],
        True,
        [],
    )

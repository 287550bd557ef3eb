"""pipeline/launcher's logback.xml and entitlements.launcher.logging: KCL's own log as JSON lines in a
rotated file, its known-benign lines lowered, the children's lines never wrapped into it.

Each test runs a small Java program (single-file source mode) on the launcher's class path, with the
launcher's logback.xml, logging through the loggers KCL uses, the messages KCL writes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
TARGET = REPO / "pipeline" / "launcher" / "target"
JAR = TARGET / "entitlements-kcl-launcher.jar"

pytestmark = pytest.mark.skipif(not JAR.exists(), reason="the launcher is not built (make setup)")

PROBE = """
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class Probe {
    public static void main(String[] args) {
        String kcl = "software.amazon.kinesis.";
        Logger leader = LoggerFactory.getLogger(kcl + "leader.DynamoDBLockBasedLeaderDecider");
        Logger sync = LoggerFactory.getLogger(kcl + "coordinator.PeriodicShardSyncManager");
        Logger drain = LoggerFactory.getLogger(kcl + "multilang.DrainChildSTDERRTask");
        Logger other = LoggerFactory.getLogger(kcl + "coordinator.Scheduler");
        int repeats = Integer.parseInt(args[0]);
        for (int i = 0; i < repeats; i++) {
            leader.info("Worker : {} is the current leader.", "worker-1");
            sync.error("Incomplete hash range found for stream {} between {} and {}.", "s", "a", "b");
            String line = "{\\"level\\": \\"INFO\\", \\"msg\\": \\"from the child\\"}";
            drain.error("Received error line from subprocess [{}] for shard {}", line, "shard-1");
            System.err.println(line);
            other.error("Caught exception", new IllegalStateException("user-canary-42"));
            try {
                Thread.sleep(repeats > 1 ? 5 : 0);  // logback checks the size at most every 0.5 s
            } catch (InterruptedException e) {
                return;
            }
        }
    }
}
"""


def _probe(tmp_path: Path, *, repeats: int = 1, **env: str) -> tuple[list[dict[str, Any]], str]:
    """(the KCL log's entries, the JVM's stderr) after the probe ran with the launcher's environment."""
    source = tmp_path / "Probe.java"
    source.write_text(PROBE)
    log = tmp_path / "kcl.log"
    done = subprocess.run(
        ["java", "-cp", f"{JAR}:{TARGET / 'lib'}/*", str(source), str(repeats)],
        env={**os.environ, "KCL_LOG_FILE": str(log), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in log.read_text().splitlines()], done.stderr


def _levels(entries: list[dict[str, Any]]) -> dict[str, tuple[str, str | None]]:
    return {str(entry["msg"])[:24]: (entry["level"], entry.get("kcl_level")) for entry in entries}


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], str]:
    """The probe as `consume` runs the launcher on the local stack, at the default level."""
    return _probe(tmp_path_factory.mktemp("local"), KCL_LOCAL_STACK="true")


def test_on_the_local_stack_the_hash_range_error_is_lowered_to_info_and_the_leader_line_dropped(
    local: tuple[list[dict[str, Any]], str],
) -> None:
    entries, _ = local
    assert _levels(entries) == {
        "Incomplete hash range fo": ("INFO", "ERROR"),
        "Caught exception": ("ERROR", None),
    }


def test_off_the_local_stack_the_hash_range_error_keeps_its_level(tmp_path: Path) -> None:
    entries, _ = _probe(tmp_path, KCL_LOCAL_STACK="false")
    assert _levels(entries)["Incomplete hash range fo"] == ("ERROR", None)


def test_at_debug_the_leader_line_is_written_at_debug_naming_its_own_level(tmp_path: Path) -> None:
    entries, _ = _probe(tmp_path, KCL_LOG_LEVEL="DEBUG")
    [leader] = [entry for entry in entries if "is the current leader" in entry["msg"]]
    assert (leader["level"], leader["kcl_level"], leader["benign"]) == ("DEBUG", "INFO", "leader-status")


def test_a_childs_line_is_on_the_jvms_stderr_once_and_never_wrapped_into_the_kcl_log(
    local: tuple[list[dict[str, Any]], str],
) -> None:
    entries, stderr = local
    assert (stderr.splitlines(), [e for e in entries if "from the child" in e["msg"]]) == (
        ['{"level": "INFO", "msg": "from the child"}'],
        [],
    )


def test_every_kcl_line_is_one_json_object_naming_an_exception_by_its_class_only(
    local: tuple[list[dict[str, Any]], str],
) -> None:
    entries, _ = local
    [caught] = [entry for entry in entries if entry["msg"] == "Caught exception"]
    assert (sorted(caught), caught["exception"], "user-canary-42" in json.dumps(entries)) == (
        ["exception", "level", "logger", "msg", "root_cause", "thread", "ts"],
        "java.lang.IllegalStateException",
        False,
    )


def test_the_kcl_log_rotates_at_its_size_keeping_its_number_of_backups(tmp_path: Path) -> None:
    _probe(tmp_path, repeats=400, KCL_LOG_MAX_BYTES="4096", KCL_LOG_BACKUPS="2")
    names = sorted(path.name for path in tmp_path.glob("kcl.log*"))
    assert names == ["kcl.log", "kcl.log.1", "kcl.log.2"]

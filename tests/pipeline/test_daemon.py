"""pipeline/daemon.py: the launcher JVM's spec and properties, the worker id and the supervisor's backoff
(no JVM started here)."""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import pytest

from config import Settings, load_settings, settings_environment
from pipeline.daemon import DaemonSpec, KclDaemon, launcher_properties, stable_worker_id, supervise

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"


def _mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


def test_the_work_folder_and_the_launcher_properties_are_owner_only(tmp_path: Path) -> None:
    settings = load_settings(consumer={"state_dir": tmp_path / "state"})
    spec = DaemonSpec.from_settings(
        settings, stream_arn=STREAM, worker_id="w1", work_dir=tmp_path / "state" / "daemon"
    )
    assert (_mode(tmp_path / "state"), _mode(spec.properties_path.parent), _mode(spec.properties_path)) == (
        0o700,
        0o700,
        0o600,
    )


def test_a_restarted_consumer_keeps_its_worker_id(tmp_path: Path) -> None:
    assert stable_worker_id("host-a", tmp_path / "state") == stable_worker_id("host-a", tmp_path / "state")


def test_two_consumers_with_their_own_state_folders_get_distinct_worker_ids(tmp_path: Path) -> None:
    assert stable_worker_id("host-a", tmp_path / "one") != stable_worker_id("host-a", tmp_path / "two")


def test_the_launcher_properties_carry_the_worker_metrics_reporter_timings() -> None:
    settings = load_settings(consumer={"worker_metrics_capture_ms": 200, "worker_metrics_report_ms": 4000})
    properties = launcher_properties(settings, stream_arn=STREAM, worker_id="w1", child_command="child")
    assert {
        "inMemoryWorkerMetricsCaptureFrequencyMillis = 200",
        "workerMetricsReporterFreqInMillis = 4000",
    } <= set(properties.splitlines())


def test_the_launcher_properties_leave_kcls_graceful_lease_handoff_off_unless_asked() -> None:
    def handoff(settings: Settings) -> set[str]:
        properties = launcher_properties(settings, stream_arn=STREAM, worker_id="w1", child_command="child")
        return {line for line in properties.splitlines() if line.startswith("gracefulLeaseHandoff")}

    assert handoff(load_settings()) == {"gracefulLeaseHandoff = false"}
    assert handoff(load_settings(consumer={"graceful_lease_handoff": True})) == {
        "gracefulLeaseHandoff = true"
    }


def test_a_run_has_delivered_once_a_shard_stats_file_is_written_after_its_start(tmp_path: Path) -> None:
    settings = load_settings(consumer={"state_dir": tmp_path / "state", "java": "true"})
    spec = DaemonSpec.from_settings(settings, stream_arn=STREAM, worker_id="w1", work_dir=tmp_path / "d")
    jar = tmp_path / "launcher.jar"
    jar.touch()
    daemon = KclDaemon(dataclasses.replace(spec, launcher_jar=jar))
    stats = tmp_path / "state" / "stats"
    stats.mkdir(parents=True)
    (stats / "shard-old.json").write_text("{}")
    os.utime(stats / "shard-old.json", ns=(0, 0))
    daemon.start()
    daemon.wait()
    before = daemon.delivered()
    (stats / "shard-1.json").write_text("{}")
    assert (before, daemon.delivered()) == (False, True)


class _ExitingDaemon:
    """A daemon that exits as soon as it starts; `deliveries[i]` says whether run i delivered records."""

    def __init__(self, deliveries: list[bool]) -> None:
        self.deliveries = deliveries
        self.runs = 0

    @property
    def running(self) -> bool:
        return False

    def start(self) -> None:
        self.runs += 1

    def wait(self, timeout: float | None = None) -> int:
        return 1

    def stop(self, timeout: float = 60.0) -> int | None:
        return 1

    def delivered(self) -> bool:
        return self.deliveries[self.runs - 1]


class _RecordingStop(threading.Event):
    """Records each backoff the supervisor waits, and stops it after `restarts` of them."""

    def __init__(self, restarts: int) -> None:
        super().__init__()
        self.restarts = restarts
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        if len(self.waits) >= self.restarts:
            self.set()
        return self.is_set()


def test_the_restart_backoff_doubles_while_runs_deliver_nothing() -> None:
    stop = _RecordingStop(restarts=4)
    supervise(_ExitingDaemon([False] * 5), stop)
    assert stop.waits == [1.0, 2.0, 4.0, 8.0]


def test_the_restart_backoff_resets_once_a_run_has_delivered_records() -> None:
    stop = _RecordingStop(restarts=5)
    supervise(_ExitingDaemon([False, False, True, False, False]), stop)
    assert stop.waits == [1.0, 2.0, 1.0, 2.0, 4.0]


def test_the_restart_backoff_never_exceeds_its_cap_before_a_delivery() -> None:
    stop = _RecordingStop(restarts=6)
    supervise(_ExitingDaemon([False] * 7), stop, max_backoff=10.0)
    assert stop.waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_the_launcher_jvm_gets_the_configured_options(tmp_path: Path) -> None:
    settings = load_settings(consumer={"state_dir": tmp_path, "java_options": "-Xss1m -XX:+UseSerialGC"})
    spec = DaemonSpec.from_settings(settings, stream_arn=STREAM, worker_id="w1", work_dir=tmp_path / "d")
    assert spec.java_options == ("-Xss1m", "-XX:+UseSerialGC")


def test_the_consumer_settings_rebuild_from_the_environment_a_child_gets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(consumer={"state_dir": tmp_path})
    for name, value in settings_environment(settings).items():
        monkeypatch.setenv(name, value)
    assert load_settings().consumer == settings.consumer


def test_kcls_own_log_and_the_childrens_lines_are_two_files_in_the_work_folder(tmp_path: Path) -> None:
    settings = load_settings(consumer={"state_dir": tmp_path / "state"})
    spec = DaemonSpec.from_settings(settings, stream_arn=STREAM, worker_id="w1", work_dir=tmp_path / "d")
    assert (spec.log_path, spec.children_log_path) == (
        tmp_path / "d" / "daemon-w1.log",
        tmp_path / "d" / "children-w1.log",
    )


def test_the_launcher_gets_the_kcl_logs_level_size_and_backups_from_the_settings(tmp_path: Path) -> None:
    settings = load_settings(
        aws={"endpoint_url": "http://127.0.0.1:5000"},
        consumer={
            "state_dir": tmp_path,
            "kcl_log_level": "WARN",
            "kcl_log_max_bytes": 65536,
            "kcl_log_backups": 3,
        },
    )
    spec = DaemonSpec.from_settings(settings, stream_arn=STREAM, worker_id="w1", work_dir=tmp_path / "d")
    assert {name: spec.environment[name] for name in spec.environment if name.startswith("KCL_")} == {
        "KCL_LOG_LEVEL": "WARN",
        "KCL_LOG_MAX_BYTES": "65536",
        "KCL_LOG_BACKUPS": "3",
        "KCL_LOCAL_STACK": "true",
    }


def test_off_the_local_stack_the_launcher_is_told_so(tmp_path: Path) -> None:
    settings = load_settings(consumer={"state_dir": tmp_path})
    spec = DaemonSpec.from_settings(settings, stream_arn=STREAM, worker_id="w1", work_dir=tmp_path / "d")
    assert spec.environment["KCL_LOCAL_STACK"] == "false"


@pytest.mark.parametrize(
    ("setting", "variable"),
    [(None, "jemalloc"), ("system", "system"), ("default", None)],
    ids=["jemalloc-unless-told", "the-pool-named", "default-leaves-pyarrow-its-choice"],
)
def test_the_children_and_the_writer_land_on_the_arrow_pool_the_settings_name(
    tmp_path: Path, setting: str | None, variable: str | None
) -> None:
    lake = {} if setting is None else {"arrow_memory_pool": setting}
    settings = load_settings(consumer={"state_dir": tmp_path}, lake=lake)
    spec = DaemonSpec.from_settings(settings, stream_arn=STREAM, worker_id="w1", work_dir=tmp_path / "d")
    assert spec.environment.get("ARROW_DEFAULT_MEMORY_POOL") == variable


def _fake_java(tmp_path: Path) -> Path:
    """A stand-in JVM: says where its KCL log goes, then writes a child's line on stderr."""
    java = tmp_path / "java"
    java.write_text(
        '#!/bin/sh\necho "$KCL_LOG_FILE" > "$(dirname "$0")/kcl-log-file"\necho \'{"msg": "child"}\' >&2\n'
    )
    java.chmod(0o700)
    return java


def test_with_no_childrens_log_the_childrens_lines_join_this_processs_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    settings = load_settings(consumer={"state_dir": tmp_path / "state", "java": str(_fake_java(tmp_path))})
    spec = DaemonSpec.from_settings(settings, stream_arn=STREAM, worker_id="w1", work_dir=tmp_path / "d")
    jar = tmp_path / "launcher.jar"
    jar.touch()
    daemon = KclDaemon(dataclasses.replace(spec, launcher_jar=jar, children_log_path=None))
    daemon.start()
    daemon.wait()
    kcl_log = (tmp_path / "kcl-log-file").read_text().strip()
    assert (capfd.readouterr().err.splitlines(), kcl_log) == (['{"msg": "child"}'], str(spec.log_path))

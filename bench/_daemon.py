"""The KCL daemon as the end-to-end benches start it (`bench_child`, `bench_consumer`): a consumer's
settings on a moto endpoint, the launcher JVM with its child importable from the working tree, the
stream read back, and the child's pid.

    settings = bench_settings(endpoint, table, state_dir, application="bench-1")
    daemon, log = bench_daemon(settings, stream_arn=arn, worker_id="drain")
"""

from __future__ import annotations

__all__ = [
    "LAUNCHER_JAR",
    "REPO",
    "bench_daemon",
    "bench_settings",
    "child_pid",
    "process_cpu_seconds",
    "stream_sequence_numbers",
]

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench._moto import REGION
from config import Settings, load_settings
from devstack.streams import read_stream
from pipeline import DaemonSpec, KclDaemon, launcher_properties

REPO = Path(__file__).resolve().parents[1]
LAUNCHER_JAR = REPO / "pipeline" / "launcher" / "target" / "entitlements-kcl-launcher.jar"


def bench_settings(
    endpoint: str,
    table: str,
    state_dir: Path,
    *,
    application: str,
    consumer: Mapping[str, Any] | None = None,
    **sections: Any,
) -> Settings:
    """The shipped defaults, with where things are set (endpoint, table, application, folders, the
    working tree's launcher jar), then `consumer`'s overrides and any other settings `sections`."""
    return load_settings(
        lake={"root": str(state_dir / "lake")},
        aws={
            "endpoint_url": endpoint,
            "region": REGION,
            "access_key_id": "bench",
            "secret_access_key": "bench",
        },
        consumer={
            "table_name": table,
            "application_name": application,
            "state_dir": state_dir,
            "launcher_jar": LAUNCHER_JAR,
            **(consumer or {}),
        },
        **sections,
    )


def bench_daemon(
    settings: Settings, *, stream_arn: str, worker_id: str, child: tuple[str, ...] = ()
) -> tuple[KclDaemon, Path]:
    """A launcher JVM (not started) as `entitlements consume` builds it, its child importable from the
    working tree; `child` (a module and its arguments) replaces `python -m entitlements.child`. The
    launcher splits its child command on spaces, so no part may hold one. Returns it and its log."""
    work_dir = settings.consumer.state_dir / "daemon"
    spec = DaemonSpec.from_settings(settings, stream_arn=stream_arn, worker_id=worker_id, work_dir=work_dir)
    spec = dataclasses.replace(spec, environment={**spec.environment, "PYTHONPATH": str(REPO)})
    if child:
        command = (sys.executable, "-m", *child)
        if any(not part or any(c.isspace() for c in part) for part in command):
            raise ValueError("a part of the child command is empty or holds whitespace")
        properties = work_dir / f"launcher-{child[0]}.properties"
        properties.write_text(
            launcher_properties(
                settings, stream_arn=stream_arn, worker_id=worker_id, child_command=" ".join(command)
            )
        )
        spec = dataclasses.replace(spec, properties_path=properties)
    assert spec.log_path is not None
    return KclDaemon(spec), spec.log_path


def stream_sequence_numbers(streams: Any, stream_arn: str) -> list[str]:
    """Every record's sequence number, in stream order, read back from the stream."""
    return [record["dynamodb"]["SequenceNumber"] for record in read_stream(streams, stream_arn)]


def child_pid(jvm: int, module: str = "entitlements.child") -> int | None:
    """The pid of the JVM's Python child running `module` (the JVM starts it directly; read from /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:  # the process ended meanwhile
            continue
        if parent == jvm and "python" in Path(command[0].decode()).name and module.encode() in command:
            return int(stat.parent.name)
    return None


def process_cpu_seconds(pid: int) -> float:
    """A live process's CPU time, user + system, every thread: the scheduler's nanosecond runtimes
    (/proc/<pid>/task/*/schedstat). /proc/<pid>/stat counts 10 ms ticks, too coarse for a figure a record."""
    total = 0
    for schedstat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(schedstat.read_text().split()[0])
        except OSError:  # a thread ended meanwhile
            continue
    return total / 1e9

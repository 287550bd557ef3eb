"""Running the Java KCL launcher: its properties file, its process, and a supervisor that restarts it.

`entitlements consume` writes the properties from the settings, passes the settings to the Python
children through the environment, and keeps the daemon running.

Logs (docs/operations/logs.md): the launcher writes KCL's own lines, one JSON object each, to a file of
their own that it rotates (`log_path`, configured through the `KCL_LOG_*` environment its logback.xml
reads). The JVM's stderr carries only what the Python children write on theirs, copied line for line by
the multilang daemon (each line one JSON object, `entitlements._logging`): to `children_log_path`, or,
when that is None (`consume`), to this process's own stderr, the operator's log stream.

A daemon that exits on its own (a child crashed, which makes the daemon exit) is restarted with backoff;
it resumes from the last checkpoint, under the same worker id (`stable_worker_id`), so it takes its own
leases back at once, with no leader needed.
"""

from __future__ import annotations

__all__ = [
    "DaemonSpec",
    "KclDaemon",
    "Supervised",
    "launcher_application_name",
    "launcher_properties",
    "stable_worker_id",
    "supervise",
]

import hashlib
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from config import Settings, arrow_environment, settings_environment
from schema import private_dir, write_private_file

logger = logging.getLogger(__name__)


def stable_worker_id(host: str, state_dir: Path) -> str:
    """The worker id of the consumer that keeps its state in `state_dir` on `host`: the same after every
    restart, and distinct for two consumers on one host with their own state folders.

    A restarted worker's leases still name it, so it takes them back at once; under a new id they would
    wait for the leader to reassign them, and after a crash of the leader KCL 3.1's leader lock stays
    held for 2 minutes (whatever the id: measured in tests/pipeline/test_kcl_startup.py)."""
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]
    return f"{host}-{digest}"


# The Kinesis consumer's KCL application (its lease tables) is the configured name with this suffix.
_KINESIS_APPLICATION_SUFFIX = "-kinesis"


def launcher_application_name(settings: Settings) -> str:
    """The KCL application (lease table) the launcher runs as: the configured name, suffixed for the
    Kinesis source. Why: the switch-over (issue 23) runs the DynamoDB Streams consumer and the Kinesis
    consumer of one table at once with the same settings but the source; their shards are unrelated
    (each stream's own ids), so one lease table would mix two streams' leases and checkpoints."""
    name = settings.consumer.application_name
    return name + _KINESIS_APPLICATION_SUFFIX if settings.source.kind == "kinesis" else name


def launcher_properties(settings: Settings, *, stream_arn: str, worker_id: str, child_command: str) -> str:
    """The launcher's properties file (keys documented in pipeline/launcher/README.md). With the Kinesis
    source the launcher reads `settings.source.stream_arn` and `stream_arn` (the table's DynamoDB
    stream) is not written."""
    consumer, aws, source = settings.consumer, settings.aws, settings.source
    kinesis = source.kind == "kinesis"
    values: dict[str, str | None] = {
        "executableName": child_command,
        "applicationName": launcher_application_name(settings),
        "workerId": worker_id,
        "regionName": aws.region,
        "sourceKind": source.kind,
        "streamArn": None if kinesis else stream_arn,
        "kinesisStreamArn": source.stream_arn if kinesis else None,
        "kinesisEndpoint": aws.endpoint("kinesis") if kinesis else None,
        "dynamoDbEndpoint": aws.endpoint("dynamodb"),
        "streamsEndpoint": aws.endpoint("streams"),
        "cloudWatchEndpoint": aws.endpoint("cloudwatch"),
        "initialPositionInStream": consumer.initial_position,
        "idleTimeBetweenReadsInMillis": str(consumer.idle_time_between_reads_ms),
        "failoverTimeMillis": str(consumer.failover_time_ms),
        "leaseAssignmentIntervalMillis": str(consumer.lease_assignment_interval_ms),
        "shardSyncIntervalMillis": str(consumer.shard_sync_interval_ms),
        "parentShardPollIntervalMillis": str(min(consumer.shard_sync_interval_ms, 10_000)),
        "inMemoryWorkerMetricsCaptureFrequencyMillis": str(consumer.worker_metrics_capture_ms),
        "workerMetricsReporterFreqInMillis": str(consumer.worker_metrics_report_ms),
        "workerMetrics": consumer.worker_metrics,
        "gracefulLeaseHandoff": str(consumer.graceful_lease_handoff).lower(),
        "metricsEnabled": str(consumer.metrics_enabled).lower(),
    }
    return "".join(f"{key} = {value}\n" for key, value in values.items() if value is not None)


@dataclass(frozen=True)
class DaemonSpec:
    java: str
    launcher_jar: Path
    properties_path: Path
    java_options: tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    # KCL's own log (JSON lines, rotated by the launcher); None: `kcl.log` beside the properties file.
    log_path: Path | None = None
    # The JVM's stderr, i.e. the children's log lines; None: this process's stderr.
    children_log_path: Path | None = None
    # The folder where the children write their shard stats after each commit: a file written there
    # after a start means that run delivered records (the supervisor's backoff resets on it).
    progress_dir: Path | None = None
    # The lake's worker writer (`python -m entitlements.lake_writer`), run beside the JVM with the same
    # environment; empty: each child commits its own flushes (`lake.writer = "child"`).
    writer_command: tuple[str, ...] = ()

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        stream_arn: str,
        worker_id: str,
        work_dir: Path,
        python: str = sys.executable,
    ) -> DaemonSpec:
        private_dir(work_dir)
        properties_path = work_dir / f"launcher-{worker_id}.properties"
        child = f"{python} -m entitlements.child"
        properties = launcher_properties(
            settings, stream_arn=stream_arn, worker_id=worker_id, child_command=child
        )
        write_private_file(properties_path, properties.encode())
        env = settings_environment(settings)
        env["ENTITLEMENTS_CONSUMER__STREAM_ARN"] = stream_arn
        env["ENTITLEMENTS_CONSUMER__WORKER_ID"] = worker_id
        aws = settings.aws
        if aws.access_key_id is not None and aws.secret_access_key is not None:
            env["AWS_ACCESS_KEY_ID"] = aws.access_key_id.get_secret_value()
            env["AWS_SECRET_ACCESS_KEY"] = aws.secret_access_key.get_secret_value()
        env["AWS_REGION"] = aws.region
        if aws.endpoint_url is not None:
            # Local stack: nothing may probe the EC2 metadata address.
            env["AWS_EC2_METADATA_DISABLED"] = "true"
        consumer = settings.consumer
        env["KCL_LOG_LEVEL"] = consumer.kcl_log_level
        env["KCL_LOG_MAX_BYTES"] = str(consumer.kcl_log_max_bytes)
        env["KCL_LOG_BACKUPS"] = str(consumer.kcl_log_backups)
        # The known-benign lines verified only on the local stack are lowered only there.
        env["KCL_LOCAL_STACK"] = str(aws.endpoint_url is not None).lower()
        env.update(arrow_environment(settings.lake))  # the children and the writer land rows
        writer: tuple[str, ...] = ()
        if settings.lake.writer == "worker":
            # The children find the writer (its socket and key) through this owner-only file.
            env["ENTITLEMENTS_LAKE__WORKER_WRITER"] = str(work_dir / f"lake-writer-{worker_id}.json")
            writer = (python, "-m", "entitlements.lake_writer")
        return cls(
            java=settings.consumer.java,
            java_options=tuple(shlex.split(settings.consumer.java_options)),
            launcher_jar=settings.consumer.launcher_jar,
            properties_path=properties_path,
            environment=env,
            log_path=work_dir / f"daemon-{worker_id}.log",
            children_log_path=work_dir / f"children-{worker_id}.log",
            progress_dir=settings.consumer.state_dir / "stats",
            writer_command=writer,
        )


class KclDaemon:
    """One launcher JVM. stdout is discarded (the JVM never writes to it); its stderr, the children's log
    lines, goes to `children_log_path` or to this process's stderr."""

    def __init__(self, spec: DaemonSpec) -> None:
        self._spec = spec
        self._writer = _Writer(spec) if spec.writer_command else None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._started_ns = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def writer_pid(self) -> int | None:
        """The lake worker writer's process, when this daemon runs one."""
        return self._writer.pid if self._writer else None

    def start(self) -> None:
        if self.running:
            raise RuntimeError("daemon already running")
        if not self._spec.launcher_jar.exists():
            raise FileNotFoundError(f"launcher jar not built: {self._spec.launcher_jar} (run make setup)")
        stderr: IO[bytes] | None = None  # inherited: the children's lines join this process's log
        if self._spec.children_log_path is not None:
            fd = os.open(self._spec.children_log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._log = os.fdopen(fd, "ab")
            stderr = self._log
        kcl_log = self._spec.log_path or self._spec.properties_path.parent / "kcl.log"
        if self._writer is not None:
            self._writer.start()  # before the JVM: its children's first flush finds it
        self._started_ns = time.time_ns()
        self._process = subprocess.Popen(
            [
                self._spec.java,
                *self._spec.java_options,
                "-jar",
                str(self._spec.launcher_jar),
                str(self._spec.properties_path),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, **self._spec.environment, "KCL_LOG_FILE": str(kcl_log)},
            start_new_session=True,  # its own process group, so a kill reaches the Python children too
        )
        logger.info("daemon started", extra={"pid": self._process.pid, "kcl_log": str(kcl_log)})

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM: the launcher shuts down gracefully and processors checkpoint what they flushed;
        then the lake writer, which their last flushes went through, stops."""
        if self._process is None:
            return None
        if self.running:
            self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self._process.wait()
        finally:
            self._close_log()
            if self._writer is not None:
                self._writer.stop()

    def kill(self) -> None:
        """SIGKILL the whole process group: a crash, with no chance to checkpoint. The lake writer is
        a process of its own, like a sidecar: it goes on serving the children of the next start."""
        if self._process is not None and self.running:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._close_log()

    def wait(self, timeout: float | None = None) -> int:
        if self._process is None:
            raise RuntimeError("daemon not started")
        return self._process.wait(timeout)

    def delivered(self) -> bool:
        """Whether the current (or last) run has committed records: a shard's stats file written since
        it started."""
        folder = self._spec.progress_dir
        if folder is None or not self._started_ns:
            return False
        try:
            return any(path.stat().st_mtime_ns >= self._started_ns for path in folder.glob("*.json"))
        except OSError:  # a file replaced meanwhile: look again on the next check
            return False

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class _Writer:
    """The lake worker writer beside the JVM: started with it, restarted whenever it exits while the
    daemon runs (at once after a run of 30 s or more, else after a wait that doubles), stopped after
    the JVM. In its own session, so a kill of the JVM's process group leaves it, and its log lines go
    where the children's go."""

    def __init__(self, spec: DaemonSpec) -> None:
        self._spec = spec
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._keeper: threading.Thread | None = None
        self._lock = threading.Lock()
        self._launched = 0.0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> None:
        with self._lock:
            self._stopping.clear()
            if self._process is None or self._process.poll() is not None:
                self._launch()
            if self._keeper is None or not self._keeper.is_alive():
                self._keeper = threading.Thread(target=self._keep, name="lake-writer-keeper", daemon=True)
                self._keeper.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        with self._lock:
            process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _launch(self) -> None:
        log = self._spec.children_log_path
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if log is not None else None
        try:
            self._process = subprocess.Popen(
                list(self._spec.writer_command),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=fd,
                env={**os.environ, **self._spec.environment},
                start_new_session=True,
            )
        finally:
            if fd is not None:
                os.close(fd)
        self._launched = time.monotonic()
        logger.info("lake writer started", extra={"pid": self._process.pid})

    def _keep(self) -> None:
        wait = 1.0
        while not self._stopping.is_set():
            process = self._process
            if process is not None and process.poll() is not None:
                # A writer that ran a while is restarted at once (its children are waiting to send
                # again); one that keeps failing to start (its address taken, a refused setting) is
                # retried less and less often.
                lived = time.monotonic() - self._launched
                wait = 0.0 if lived > 30 else min(max(wait, 0.5) * 2, 30.0)
                logger.warning(
                    "lake writer exited; restarting it",
                    extra={"exit_code": process.returncode, "in_seconds": wait},
                )
                if self._stopping.wait(wait):
                    return
                with self._lock:
                    # start() may have launched one meanwhile: a second would find its address taken.
                    if not self._stopping.is_set() and self._process is process:
                        self._launch()
            self._stopping.wait(0.2)


class Supervised(Protocol):
    """What the supervisor needs of a daemon (`KclDaemon`)."""

    @property
    def running(self) -> bool: ...

    def start(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def stop(self, timeout: float = 60.0) -> int | None: ...

    def delivered(self) -> bool: ...


def supervise(
    daemon: Supervised,
    stop: threading.Event,
    *,
    max_backoff: float = 60.0,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Keep the daemon running until `stop` is set; restart it with backoff when it exits on its own.

    The backoff doubles while restarts keep failing, up to `max_backoff`, and starts again from 1 s once
    a run has delivered records (or run for five minutes): a crash after real work is not a crash loop.
    `entitlements consume` caps it at the lease failover time: a worker that waited longer between
    attempts would lose its leases to the others anyway, so a longer wait buys nothing but downtime.
    """
    backoff = 1.0
    daemon.start()
    started = monotonic()
    delivered = False
    while not stop.is_set():
        if daemon.running:
            delivered = delivered or daemon.delivered()
            stop.wait(1.0)
            continue
        code = daemon.wait()
        if delivered or daemon.delivered() or monotonic() - started > 300:
            backoff = 1.0
        logger.error("daemon exited; restarting", extra={"exit_code": code, "backoff_s": backoff})
        stop.wait(backoff)
        backoff = min(backoff * 2, max_backoff)
        if not stop.is_set():
            daemon.start()
            started = monotonic()
            delivered = False
    daemon.stop()

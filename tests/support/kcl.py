"""Running the real Java KCL daemon in tests: settings tuned for quick lease take-up, and waiting."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import psutil  # type: ignore[import-untyped]  # the venv has no types-psutil

from analytics.lake import Lake, lake_from_settings
from config import ArraySettings, Settings, load_settings
from devstack.fake_array import FakeArrayServer
from devstack.kinesis_forwarder import Faults, KinesisForwarder, create_kinesis_stream
from devstack.moto_server import MotoServer
from devstack.streams import read_stream
from devstack.ttl_emulator import TtlEmulator
from entitlements.compose import drain_retry_queue, setup_retry_queues
from pipeline.daemon import DaemonSpec, KclDaemon
from pipeline.tables import create_table
from processors.cleanup import DrainReport
from schema.clock import Clock, SystemClock

REPO = Path(__file__).resolve().parents[2]
LAUNCHER_JAR = REPO / "pipeline" / "launcher" / "target" / "entitlements-kcl-launcher.jar"


def consumer_settings(endpoint: str, table_name: str, state_dir: Path, **overrides: Any) -> Settings:
    consumer = {
        "table_name": table_name,
        "application_name": f"app-{table_name}",
        "state_dir": state_dir,
        "idle_time_between_reads_ms": 200,
        "failover_time_ms": 4000,
        "lease_assignment_interval_ms": 1000,
        "shard_sync_interval_ms": 2000,
        "commit_every_records": 50,
        "commit_interval_seconds": 0.5,
        "event_journal": state_dir / "journal.jsonl",
        "launcher_jar": LAUNCHER_JAR,
        **overrides.pop("consumer", {}),
    }
    lake = {"root": str(state_dir / "lake"), "flush_seconds": 1.0, **overrides.pop("lake", {})}
    # The table's own retry queue: the session's moto server is shared by every test of an xdist
    # worker, and a queue shared with them would hand this consumer's drain their parked work.
    cleanup = {"retry_queue_name": f"retry-{table_name}", **overrides.pop("cleanup", {})}
    return load_settings(
        lake=lake,
        cleanup=cleanup,
        aws={
            "endpoint_url": endpoint,
            "region": "eu-west-1",
            "access_key_id": "testing",
            "secret_access_key": "testing",
        },
        consumer=consumer,
        **overrides,
    )


def aws_client(endpoint: str, service: str) -> Any:
    """A client of `service` on the moto server at `endpoint`, with botocore's default retries."""
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def dynamodb(endpoint: str) -> Any:
    return aws_client(endpoint, "dynamodb")


def active_row(user: str) -> dict[str, Any]:
    """An Active entitlement row of `user` on account acct-1, as `put_item` takes it."""
    return {
        "pk": {"S": f"USER#{user}"},
        "sk": {"S": "ENTITLEMENT#acct-1"},
        "userId": {"S": user},
        "arrayAccountId": {"S": "acct-1"},
        "status": {"S": "Active"},
    }


def new_table(endpoint: str) -> tuple[str, str]:
    """A fresh table (so each test module has its own stream); returns (name, stream ARN)."""
    name = f"entitlements-{uuid.uuid4().hex[:8]}"
    client = dynamodb(endpoint)
    create_table(client, name)
    arn = client.describe_table(TableName=name)["Table"]["LatestStreamArn"]
    return name, arn


RETRY_WORKER_BUDGET_SECONDS = ArraySettings().retry_budget_seconds  # what ships


@dataclass(frozen=True)
class ForwardedTable:
    """A fresh table (`new_table`) whose changes `forwarder` (not started) puts on a Kinesis stream of
    `shards` shards of its own, as `entitlements local up --kinesis-shards` does."""

    name: str
    stream_arn: str
    kinesis_name: str
    kinesis_arn: str
    forwarder: KinesisForwarder


def forwarded_table(endpoint: str, shards: int, faults: Faults | None = None) -> ForwardedTable:
    name, stream_arn = new_table(endpoint)
    kinesis = aws_client(endpoint, "kinesis")
    kinesis_name = f"{name}-changes"
    kinesis_arn = create_kinesis_stream(kinesis, kinesis_name, shards)
    forwarder = KinesisForwarder(
        streams=aws_client(endpoint, "dynamodbstreams"),
        kinesis=kinesis,
        stream_arn=stream_arn,
        kinesis_stream_name=kinesis_name,
        table_name=name,
        faults=faults or Faults(),
    )
    return ForwardedTable(name, stream_arn, kinesis_name, kinesis_arn, forwarder)


def lease_owners(client: Any, lease_table: str) -> dict[str, str | None]:
    """Each shard's lease owner, read from an application's lease table (none before a worker of it
    created the table)."""
    try:
        items = client.scan(TableName=lease_table, ConsistentRead=True)["Items"]
    except client.exceptions.ResourceNotFoundException:
        return {}
    owners: dict[str, str | None] = {
        str(item["leaseKey"]["S"]): str(item["leaseOwner"]["S"]) if "leaseOwner" in item else None
        for item in items
        if "leaseKey" in item
    }
    return owners


@dataclass
class RunningConsumer:
    settings: Settings
    stream_arn: str
    daemons: dict[str, KclDaemon]

    @property
    def journal(self) -> Path:
        path = self.settings.consumer.event_journal
        assert path is not None
        return path

    def start_worker(self, worker_id: str) -> KclDaemon:
        """Start the worker, or start it again after a kill: the same daemon, as `consume`'s
        supervisor restarts it (its lake writer, which a kill of the JVM leaves running, is kept)."""
        daemon = self.daemons.get(worker_id)
        if daemon is None:
            spec = DaemonSpec.from_settings(
                self.settings,
                stream_arn=self.stream_arn,
                worker_id=worker_id,
                work_dir=self.settings.consumer.state_dir / "daemon",
            )
            daemon = KclDaemon(spec)
        daemon.start()
        self.daemons[worker_id] = daemon
        return daemon

    def start_next_worker(self) -> str:
        """Start one more worker of the application, named after how many were started before it."""
        worker_id = f"worker-{len(self.daemons) + 1}"
        self.start_worker(worker_id)
        return worker_id

    def live_workers(self) -> set[str]:
        return {worker for worker, daemon in self.daemons.items() if daemon.running}

    def events(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        return [json.loads(line) for line in self.journal.read_text().splitlines() if line]

    def wait_for(
        self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 180.0
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self.events()
            if predicate(events):
                return events
            time.sleep(0.5)
        logs = self.settings.consumer.state_dir / "daemon"
        raise AssertionError(
            f"timed out with {len(self.events())} events in the journal; daemon logs in {logs}"
        )

    def stop_all(self) -> None:
        for daemon in self.daemons.values():
            daemon.stop(timeout=60)


@contextmanager
def running_consumer(
    endpoint: str,
    state_dir: Path,
    *,
    worker_id: str = "worker-1",
    table: tuple[str, str] | None = None,
    **overrides: Any,
) -> Iterator[RunningConsumer]:
    """A consumer of a fresh table's stream, or of `table` ((name, stream ARN), e.g. another consumer's)."""
    name, arn = new_table(endpoint) if table is None else table
    settings = consumer_settings(endpoint, name, state_dir, **overrides)
    # The setup command's work: the KCL children only look the cleanup's retry queue up.
    setup_retry_queues(settings)
    consumer = RunningConsumer(settings=settings, stream_arn=arn, daemons={})
    if worker_id:
        consumer.start_worker(worker_id)
    try:
        yield consumer
    finally:
        consumer.stop_all()


def ttl_emulator(
    moto_server: MotoServer, consumer: RunningConsumer, clock: Clock | None = None
) -> TtlEmulator:
    """DynamoDB's TTL on the consumer's table (a sweep every 0.2 s under moto's lock), on `clock` (the
    real clock by default); not started: use it in a `with`."""
    return TtlEmulator(
        SystemClock() if clock is None else clock,
        interval_seconds=0.2,
        lock=moto_server.dynamodb_lock,
        table_names=[consumer.settings.consumer.table_name],
    )


def stream_contents(endpoint: str, stream_arn: str) -> list[dict[str, Any]]:
    """Every record the stream holds, read back from the stream itself (not from what a test wrote)."""
    return read_stream(aws_client(endpoint, "dynamodbstreams"), stream_arn)


def python_children(daemon: KclDaemon) -> list[int]:
    """The pids of the Python record processors a daemon has started."""
    assert daemon.pid is not None
    return [
        child.pid
        for child in psutil.Process(daemon.pid).children(recursive=True)
        if "entitlements.child" in " ".join(child.cmdline())
    ]


@dataclass
class CleanupStack:
    """A running consumer whose child lands the lake and cleans up on the fake Array, with the TTL
    emulator on its table (what the crash and exactly-once daemon tests run under load)."""

    consumer: RunningConsumer
    array: FakeArrayServer
    emulator: TtlEmulator
    endpoint: str

    @property
    def table(self) -> str:
        return self.consumer.settings.consumer.table_name

    @property
    def lake(self) -> Lake:
        return lake_from_settings(self.consumer.settings)

    def drain_retry_queue(self, max_seconds: float) -> DrainReport:
        """What an operator's retry worker does: finish the cleanups the consumer parked (a budget run
        out under load, a kill's in-flight claim), landing their outcomes in the same lake. It runs with
        the shipped retry budget, not the short one this stack gives the consumer (which parks more)."""
        settings = self.consumer.settings
        array = settings.array.model_copy(update={"retry_budget_seconds": RETRY_WORKER_BUDGET_SECONDS})
        return drain_retry_queue(settings.model_copy(update={"array": array}), max_seconds=max_seconds)


@contextmanager
def cleanup_stack(moto_server: MotoServer, tmp_path: Path) -> Iterator[CleanupStack]:
    """The real child with its lake and cleanup handlers on the fake Array, and TTL on the table."""
    endpoint = moto_server.endpoint
    with (
        FakeArrayServer(host="127.0.0.1", port=0) as array,
        running_consumer(
            endpoint,
            tmp_path,
            array={"base_url": array.url, "retry_budget_seconds": 5.0, "max_attempts": 2},
        ) as consumer,
        ttl_emulator(moto_server, consumer) as emulator,
    ):
        yield CleanupStack(consumer, array, emulator, endpoint)

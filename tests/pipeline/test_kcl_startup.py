"""How the real daemon starts with the shipped timing defaults, read from its own log: the mechanisms
that make a fresh start quick, not the wall time it took on this machine.

- The launcher writes the shard leases before the scheduler starts, so KCL skips its start-up shard sync
  (and the random wait it spends while the lease table is empty).
- The leader assigns the lease in its first assignment cycle that sees the worker's metrics report.
- A worker restarted after a crash under the same worker id takes its own lease back at once, without
  the leader: KCL 3.1's leader lock outlives the crash by two minutes even for its own owner's name.
- Worker metrics are on (KCL 3 balances leases by each worker's CPU) and no connection of the daemon
  leaves 127.0.0.1: the launcher hands KCL its CPU metric, so KCL never probes the EC2 metadata address.
- The run counts as having delivered (the supervisor's backoff starts again from 1 s after it) once it
  has handled its first record, and not before.
"""

from __future__ import annotations

import ipaddress
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from config import ConsumerSettings
from pipeline.daemon import KclDaemon, stable_worker_id
from tests.support.kcl import RunningConsumer, active_row, dynamodb, running_consumer

pytestmark = pytest.mark.kcl

DEFAULTS = ConsumerSettings()
# The shipped timings, in place of the quick-start ones the other kcl tests use.
SHIPPED = {
    "idle_time_between_reads_ms": DEFAULTS.idle_time_between_reads_ms,
    "failover_time_ms": DEFAULTS.failover_time_ms,
    "lease_assignment_interval_ms": DEFAULTS.lease_assignment_interval_ms,
    "shard_sync_interval_ms": DEFAULTS.shard_sync_interval_ms,
    "worker_metrics_capture_ms": DEFAULTS.worker_metrics_capture_ms,
    "worker_metrics_report_ms": DEFAULTS.worker_metrics_report_ms,
    "worker_metrics": DEFAULTS.worker_metrics,
}


def put_row(consumer: RunningConsumer, user: str) -> None:
    dynamodb_client = dynamodb(consumer.settings.aws.endpoint_url or "")
    dynamodb_client.put_item(
        TableName=consumer.settings.consumer.table_name,
        Item=active_row(user),
    )


def daemon_log(consumer: RunningConsumer, worker_id: str) -> list[str]:
    path = consumer.settings.consumer.state_dir / "daemon" / f"daemon-{worker_id}.log"
    return path.read_text().splitlines()


def first(lines: list[str], text: str) -> int:
    return next(i for i, line in enumerate(lines) if text in line)


@dataclass
class Start:
    log: list[str]
    # Every remote address a connection of the JVM (or its children) had while it started and ran.
    remote_hosts: set[str] = field(default_factory=set)
    worker_metric_rows: list[dict[str, Any]] = field(default_factory=list)
    # KclDaemon.delivered() (what the supervisor resets its backoff on) before and after the first record.
    delivered: tuple[bool, bool] = (False, False)


def _remote_hosts(pid: int, seen: set[str], stop: threading.Event) -> None:
    """Sample the process tree's connections every 50 ms: a pending connect (SYN_SENT) shows too."""
    while not stop.is_set():
        try:
            root = psutil.Process(pid)
            for process in [root, *root.children(recursive=True)]:
                seen.update(c.raddr.ip for c in process.net_connections(kind="inet") if c.raddr)
        except psutil.Error:
            pass
        stop.wait(0.05)


@pytest.fixture(scope="module")
def started(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Start]:
    """One fresh start (new table, new application) with the shipped timings, up to its first record
    and two worker-metrics reports after it; yields the daemon's log, the remote addresses its
    connections had, and the worker-metrics table's rows."""
    with running_consumer(
        moto_endpoint, tmp_path_factory.mktemp("kcl-start"), worker_id="", consumer=SHIPPED
    ) as consumer:
        put_row(consumer, "u-start")
        daemon = consumer.start_worker("worker-start")
        assert daemon.pid is not None
        seen: set[str] = set()
        stop = threading.Event()
        sampler = threading.Thread(target=_remote_hosts, args=(daemon.pid, seen, stop), daemon=True)
        sampler.start()
        delivered_before = daemon.delivered()
        try:
            consumer.wait_for(lambda events: len(events) >= 1)
            stop.wait(2 * DEFAULTS.worker_metrics_report_ms / 1000)
        finally:
            stop.set()
            sampler.join()
        # The first record's commit writes the shard's stats file: at most a commit interval later.
        deadline = time.monotonic() + DEFAULTS.commit_interval_seconds + 30
        while not daemon.delivered() and time.monotonic() < deadline:
            time.sleep(0.2)
        table = f"{consumer.settings.consumer.application_name}-WorkerMetricStats"
        rows = dynamodb(consumer.settings.aws.endpoint_url or "").scan(TableName=table)["Items"]
        yield Start(daemon_log(consumer, "worker-start"), seen, rows, (delivered_before, daemon.delivered()))


def test_the_shard_lease_exists_before_the_scheduler_starts(started: Start) -> None:
    log = started.log
    created = first(log, "Created 1 shard leases before the scheduler starts")
    scheduler = first(log, "Initializing LeaseCoordinator attempt 1")
    skipped = [line for line in log if "Skipping shard sync per configuration setting" in line]
    waited = [line for line in log if "Lease table is still empty" in line]
    assert (created < scheduler, len(skipped), waited) == (True, 1, [])


def test_the_lease_is_assigned_in_the_first_cycle_that_sees_the_workers_metrics(started: Start) -> None:
    log = started.log
    reported = first(log, "Total WorkerMetricStats available : 1")
    cycle_end = first(log[reported:], "Stale workerMetrics list") + reported
    assigned = first(log, "Assigning lease")
    assert reported < assigned < cycle_end


def test_the_worker_reports_its_cpu_for_kcls_lease_balancing(started: Start) -> None:
    (row,) = started.worker_metric_rows
    # KCL stores each metric's recent values (attribute "sts") under its short name ("C" for CPU), in
    # percent; an empty row (worker metrics off) has none.
    values = [float(v["N"]) for v in row["sts"]["M"]["C"]["L"]]
    assert (row["wid"]["S"], bool(values), all(0.0 <= v <= 100.0 for v in values)) == (
        "worker-start",
        True,
        True,
    )


def test_no_connection_of_the_daemon_leaves_loopback_and_kcl_never_probes_a_platform(started: Start) -> None:
    probes = [line for line in started.log if "IMDS" in line or "operating range metadata provider" in line]
    hosts = {_ipv4(host) for host in started.remote_hosts}
    assert (hosts - {"127.0.0.1"}, probes, bool(hosts)) == (set(), [], True)


def test_the_run_counts_as_delivered_for_the_supervisors_backoff_once_it_handled_its_first_record(
    started: Start,
) -> None:
    assert started.delivered == (False, True)


def _ipv4(host: str) -> str:
    """An IPv4-mapped IPv6 address (the JVM's sockets are dual-stack) as its IPv4 address."""
    address = ipaddress.ip_address(host)
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped or address)


def test_a_worker_restarted_after_a_crash_keeps_its_id_and_takes_its_own_lease_back_without_the_leader(
    moto_endpoint: str, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    worker_id = stable_worker_id("this-host", state_dir)
    with running_consumer(moto_endpoint, state_dir, worker_id="", consumer=SHIPPED) as consumer:
        put_row(consumer, "u-before")
        first_run = consumer.start_worker(stable_worker_id("this-host", state_dir))
        consumer.wait_for(lambda events: any(e["keys"]["pk"] == "USER#u-before" for e in events))
        first_run.kill()
        put_row(consumer, "u-after")
        restarted: KclDaemon = consumer.start_worker(stable_worker_id("this-host", state_dir))
        consumer.wait_for(lambda events: any(e["keys"]["pk"] == "USER#u-after" for e in events))
        restarted.stop(timeout=60)
        runs = re.split(r"Starting worker (\S+) of application", "\n".join(daemon_log(consumer, worker_id)))
    # runs: [before, id of run 1, run 1, id of run 2, run 2]
    second = runs[4].splitlines()
    consumed = first(second, "Created new shardConsumer")
    # KCL 3.1's leader lock outlives the crash (2 minutes, whoever the owner): the restarted worker is
    # not the leader, and no assignment happens; the lease still names its id, so it takes it back.
    assigned = [line for line in second[:consumed] if "Assigning lease" in line]
    not_leader = [line for line in second if "is not a leader" in line]
    assert (runs[1], runs[3], assigned, bool(not_leader)) == (worker_id, worker_id, [], True)

"""How the real daemon starts with the shipped timing defaults, read from its own log: the mechanisms
that make a fresh start quick, not the wall time it took on this machine.

- The launcher writes the shard leases before the scheduler starts, so KCL skips its start-up shard sync
  (and the random wait it spends while the lease table is empty).
- The leader assigns the lease in its first assignment cycle that sees the worker's metrics report.
- A worker restarted after a crash under the same worker id takes its own lease back at once, without
  the leader: KCL 3.1's leader lock outlives the crash by two minutes even for its own owner's name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from config import ConsumerSettings
from pipeline.daemon import KclDaemon, stable_worker_id
from tests.support.kcl import RunningConsumer, dynamodb, running_consumer

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
}


def put_row(consumer: RunningConsumer, user: str) -> None:
    dynamodb_client = dynamodb(consumer.settings.aws.endpoint_url or "")
    dynamodb_client.put_item(
        TableName=consumer.settings.consumer.table_name,
        Item={
            "pk": {"S": f"USER#{user}"},
            "sk": {"S": "ENTITLEMENT#acct-1"},
            "userId": {"S": user},
            "arrayAccountId": {"S": "acct-1"},
            "status": {"S": "Active"},
        },
    )


def daemon_log(consumer: RunningConsumer, worker_id: str) -> list[str]:
    path = consumer.settings.consumer.state_dir / "daemon" / f"daemon-{worker_id}.log"
    return path.read_text().splitlines()


def first(lines: list[str], text: str) -> int:
    return next(i for i, line in enumerate(lines) if text in line)


@pytest.fixture(scope="module")
def started(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """One fresh start (new table, new application) with the shipped timings, up to its first record;
    yields the daemon's log."""
    with running_consumer(
        moto_endpoint, tmp_path_factory.mktemp("kcl-start"), worker_id="", consumer=SHIPPED
    ) as consumer:
        put_row(consumer, "u-start")
        consumer.start_worker("worker-start")
        consumer.wait_for(lambda events: len(events) >= 1)
        yield daemon_log(consumer, "worker-start")


def test_the_shard_lease_exists_before_the_scheduler_starts(started: list[str]) -> None:
    created = first(started, "Created 1 shard leases before the scheduler starts")
    scheduler = first(started, "Initializing LeaseCoordinator attempt 1")
    skipped = [line for line in started if "Skipping shard sync per configuration setting" in line]
    waited = [line for line in started if "Lease table is still empty" in line]
    assert (created < scheduler, len(skipped), waited) == (True, 1, [])


def test_the_lease_is_assigned_in_the_first_cycle_that_sees_the_workers_metrics(started: list[str]) -> None:
    reported = first(started, "Total WorkerMetricStats available : 1")
    cycle_end = first(started[reported:], "Stale workerMetrics list") + reported
    assigned = first(started, "Assigning lease")
    assert reported < assigned < cycle_end


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

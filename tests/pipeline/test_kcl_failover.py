"""Failover through the real daemon, with the shipped timings: when a lease holder that is not the leader
dies, the leader's assignment gives its lease to the surviving worker within one failover period plus
one lease-assignment interval (+ 5 s, the issue's bound).

One shard on moto: the first worker up takes the leader lock and the lease; the lease is then moved to
the second worker as the leader's own assignment writes it, so the holder is not the leader. The move is
timed on the lease table itself: from the holder's kill to the first read that names the other worker.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from config import ConsumerSettings
from tests.support.kcl import RunningConsumer, active_row, dynamodb, running_consumer
from tests.support.polling import wait_for

pytestmark = pytest.mark.kcl

DEFAULTS = ConsumerSettings()
SHIPPED = {
    "idle_time_between_reads_ms": DEFAULTS.idle_time_between_reads_ms,
    "failover_time_ms": DEFAULTS.failover_time_ms,
    "lease_assignment_interval_ms": DEFAULTS.lease_assignment_interval_ms,
    "shard_sync_interval_ms": DEFAULTS.shard_sync_interval_ms,
    "worker_metrics_capture_ms": DEFAULTS.worker_metrics_capture_ms,
    "worker_metrics_report_ms": DEFAULTS.worker_metrics_report_ms,
}
BOUND_SECONDS = (DEFAULTS.failover_time_ms + DEFAULTS.lease_assignment_interval_ms) / 1000 + 5
STARTUP_SECONDS = 180.0


def put_row(consumer: RunningConsumer, user: str) -> None:
    dynamodb(consumer.settings.aws.endpoint_url or "").put_item(
        TableName=consumer.settings.consumer.table_name,
        Item=active_row(user),
    )


def handled(consumer: RunningConsumer, user: str) -> bool:
    return any(event["keys"]["pk"] == f"USER#{user}" for event in consumer.events())


def daemon_log(consumer: RunningConsumer, worker_id: str) -> str:
    path = consumer.settings.consumer.state_dir / "daemon" / f"daemon-{worker_id}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def the_lease(consumer: RunningConsumer) -> dict[str, Any]:
    client = dynamodb(consumer.settings.aws.endpoint_url or "")
    items = client.scan(TableName=consumer.settings.consumer.application_name, ConsistentRead=True)["Items"]
    [lease] = [item for item in items if "leaseKey" in item]
    return dict(lease)


def owner(consumer: RunningConsumer) -> str:
    return str(the_lease(consumer)["leaseOwner"]["S"])


def hand_lease(consumer: RunningConsumer, old_owner: str, new_owner: str) -> None:
    """Move the lease as the leader's assignment writes it: owner put, checkpoint owner removed, lease
    counter and owner switches added (the old owner loses it at its next renewal)."""
    dynamodb(consumer.settings.aws.endpoint_url or "").update_item(
        TableName=consumer.settings.consumer.application_name,
        Key={"leaseKey": the_lease(consumer)["leaseKey"]},
        UpdateExpression="SET leaseOwner = :new REMOVE checkpointOwner ADD leaseCounter :one, "
        "ownerSwitchesSinceCheckpoint :one",
        ConditionExpression="leaseOwner = :old",
        ExpressionAttributeValues={":new": {"S": new_owner}, ":old": {"S": old_owner}, ":one": {"N": "1"}},
    )


def test_a_dead_non_leader_holders_lease_moves_within_failover_plus_one_assignment_interval(
    moto_endpoint: str, tmp_path: Path
) -> None:
    with running_consumer(moto_endpoint, tmp_path, worker_id="", consumer=SHIPPED) as consumer:
        put_row(consumer, "u-leader")
        consumer.start_worker("leader")
        wait_for(lambda: handled(consumer, "u-leader"), timeout=STARTUP_SECONDS)
        holder = consumer.start_worker("holder")
        both = "Total WorkerMetricStats available : 2"
        wait_for(lambda: both in daemon_log(consumer, "leader"), timeout=STARTUP_SECONDS)
        hand_lease(consumer, "leader", "holder")
        wait_for(lambda: "lost lease" in daemon_log(consumer, "leader"), timeout=STARTUP_SECONDS)
        put_row(consumer, "u-holder")
        wait_for(lambda: handled(consumer, "u-holder"), timeout=STARTUP_SECONDS)
        killed = time.monotonic()
        holder.kill()
        moved = wait_for(
            lambda: time.monotonic() if owner(consumer) == "leader" else None,
            timeout=STARTUP_SECONDS,
            interval=0.2,
        )
    assert moved - killed <= BOUND_SECONDS

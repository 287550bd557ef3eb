"""Stuck leases: a lease the KCL application's table holds that nobody renews or advances.

KCL renews a held lease every third of the failover time (its `leaseCounter` grows) and a working
consumer's checkpoint moves with the records it finishes. A lease whose counter and checkpoint both
stay still for three failover times is read by nobody, whatever its `leaseOwner` says (an owner that
hangs without crashing, a lease no worker takes). `LeaseWatch` keeps, per lease, when either last
changed; `watch_leases` reads the lease table every failover time and publishes the count as
`entitlements_consumer_stuck_leases` (Prometheus and EMF), the figure an alarm reads.

A lease at `SHARD_END` is finished (its shard closed and fully read) and never counts. Reading the
table costs one Scan of a row per shard each failover time (about 0.1 read units a second for a
few dozen shards). Nothing read here is personal: lease keys are shard ids, owners worker ids.
"""

from __future__ import annotations

__all__ = ["SHARD_END", "LeaseWatch", "watch_leases"]

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import telemetry

logger = logging.getLogger(__name__)

SHARD_END = "SHARD_END"
# Three failover times: one to notice a dead holder, one for another worker to take the lease, one
# spare, so that an ordinary failover never reads as stuck.
STUCK_AFTER_FAILOVERS = 3


@dataclass
class _Seen:
    counter: str | None
    checkpoint: str | None
    changed_at: float


class LeaseWatch:
    """Counts the leases that neither renewed nor advanced for `stuck_after` seconds."""

    def __init__(self, stuck_after: float, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._stuck_after = stuck_after
        self._monotonic = monotonic
        self._seen: dict[str, _Seen] = {}

    def observe(self, leases: Iterable[Mapping[str, Any]]) -> int:
        """Take one read of the lease table (low-level DynamoDB items); returns the stuck leases."""
        now = self._monotonic()
        present: set[str] = set()
        stuck = 0
        for item in leases:
            key = _text(item, "leaseKey")
            if key is None:
                continue
            present.add(key)
            counter, checkpoint = _number(item, "leaseCounter"), _text(item, "checkpoint")
            seen = self._seen.get(key)
            if seen is None or (seen.counter, seen.checkpoint) != (counter, checkpoint):
                self._seen[key] = _Seen(counter, checkpoint, now)
                continue
            if checkpoint != SHARD_END and now - seen.changed_at >= self._stuck_after:
                stuck += 1
        for gone in set(self._seen) - present:  # deleted leases (cleaned-up ended shards)
            del self._seen[gone]
        return stuck


def _text(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    return str(value["S"]) if isinstance(value, Mapping) and "S" in value else None


def _number(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    return str(value["N"]) if isinstance(value, Mapping) and "N" in value else None


def _scan(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {
        "TableName": table,
        "ProjectionExpression": "leaseKey, leaseCounter, checkpoint",
    }
    while True:
        page = dynamodb.scan(**request)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return items
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def watch_leases(dynamodb: Any, table: str, *, failover_seconds: float, stop: threading.Event) -> None:
    """Until `stop`: read lease table `table` every failover time and publish the stuck leases. A read
    that fails (the table not made yet, a throttle) is logged and tried again at the next tick."""
    watch = LeaseWatch(STUCK_AFTER_FAILOVERS * failover_seconds)
    while not stop.is_set():
        try:
            telemetry.stuck_leases(watch.observe(_scan(dynamodb, table)))
        except Exception as error:  # a watch must never stop the consumer; the next tick tries again
            logger.warning("lease table not read", extra={"error": type(error).__name__})
        stop.wait(failover_seconds)

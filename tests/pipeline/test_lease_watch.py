"""pipeline/lease_watch.py: a lease neither renewed nor advanced for three failover times counts as stuck."""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import REGISTRY

from pipeline.lease_watch import SHARD_END, LeaseWatch, watch_leases

STUCK_AFTER = 30.0


def lease(key: str, counter: int, checkpoint: str = "100") -> dict[str, Any]:
    return {"leaseKey": {"S": key}, "leaseCounter": {"N": str(counter)}, "checkpoint": {"S": checkpoint}}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_renewed_on_every_read_is_never_stuck() -> None:
    clock = Clock()
    watch = LeaseWatch(STUCK_AFTER, monotonic=clock)
    counts = []
    for tick in range(10):
        clock.now = tick * 10.0
        counts.append(watch.observe([lease("shardId-1", tick)]))
    assert counts == [0] * 10


def test_a_lease_that_stays_still_for_three_failover_times_is_stuck_until_it_moves() -> None:
    clock = Clock()
    watch = LeaseWatch(STUCK_AFTER, monotonic=clock)
    counts = []
    for now, counter in ((0, 5), (10, 5), (29, 5), (30, 5), (40, 5), (50, 6), (60, 6)):
        clock.now = float(now)
        counts.append(watch.observe([lease("shardId-1", counter)]))
    assert counts == [0, 0, 0, 1, 1, 0, 0]


def test_a_moving_checkpoint_alone_keeps_a_lease_from_being_stuck() -> None:
    clock = Clock()
    watch = LeaseWatch(STUCK_AFTER, monotonic=clock)
    counts = []
    for tick in range(6):
        clock.now = tick * 20.0
        counts.append(watch.observe([lease("shardId-1", 7, checkpoint=str(100 + tick))]))
    assert counts == [0] * 6


def test_a_finished_shards_lease_never_counts() -> None:
    clock = Clock()
    watch = LeaseWatch(STUCK_AFTER, monotonic=clock)
    watch.observe([lease("shardId-1", 3, SHARD_END)])
    clock.now = 300.0
    assert watch.observe([lease("shardId-1", 3, SHARD_END)]) == 0


def test_only_the_still_lease_of_several_counts() -> None:
    clock = Clock()
    watch = LeaseWatch(STUCK_AFTER, monotonic=clock)
    watch.observe([lease("a", 1), lease("b", 1)])
    clock.now = 40.0
    assert watch.observe([lease("a", 1), lease("b", 2)]) == 1


class _OneRead:
    """A lease table read once (two pages), after which the watch is stopped."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.requests: list[dict[str, Any]] = []

    def scan(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        if "ExclusiveStartKey" not in request:
            return {"Items": [lease("a", 1)], "LastEvaluatedKey": {"leaseKey": {"S": "a"}}}
        self.stop.set()
        return {"Items": [lease("b", 1)]}


def test_the_watch_reads_every_page_of_the_lease_table_and_publishes_the_figure() -> None:
    stop = threading.Event()
    table = _OneRead(stop)
    watch_leases(table, "app", failover_seconds=0.01, stop=stop)
    published = REGISTRY.get_sample_value("entitlements_consumer_stuck_leases")
    assert ([r.get("ExclusiveStartKey") for r in table.requests], published) == (
        [None, {"leaseKey": {"S": "a"}}],
        0.0,
    )


class _Failing:
    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.calls = 0

    def scan(self, **request: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 2:
            self.stop.set()
        raise OSError("unreachable")


def test_a_failing_read_is_tried_again_at_the_next_tick() -> None:
    stop = threading.Event()
    table = _Failing(stop)
    watch_leases(table, "app", failover_seconds=0.01, stop=stop)
    assert table.calls == 2

"""The seed's race, arising by itself: N concurrent clients drive the service (relinks racing second signups
and cancellations), the real KCL daemon lands what the table's stream says in the lake, and the audits
read it. With SaveIfActive nothing is harmed and every refused link is an outcome; with devstack's
unguarded link write the audits find exactly the rows it overwrote.

One table, one daemon, two phases on disjoint users: the guarded phase first (audited alone), then the
unguarded one. A real clock: no cleanup record expires during the test, so cleanup never touches a row
the audits count.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from analytics import lake_from_settings, snapshot
from analytics.audits import AuditReport, load_config, run_audits
from devstack._fake_http import Hooks
from devstack.fake_array import PROCESSOR_TOKEN, FakeArrayServer
from devstack.fake_transactions import FakeTransactionsServer
from devstack.moto_server import MotoServer
from devstack.service_workload import WorkloadConfig, WorkloadSummary, run_service_workload
from devstack.workload import Mix
from entitlements import compose
from entitlements._workload import local_service
from tests.support.kcl import RunningConsumer, running_consumer, stream_contents
from tests.support.lake import query_lake

pytestmark = pytest.mark.kcl

# Sized so the race happens often enough on a loaded 2-core machine: every relink spends 2 x LATENCY in
# its network window, and every cancellation and second signup is aimed at a user mid-relink.
LATENCY = 0.1
USERS, OPERATIONS, CLIENTS = 40, 400, 8
AT_LEAST = 10


@dataclass
class World:
    consumer: RunningConsumer
    array: FakeArrayServer
    transactions: FakeTransactionsServer
    endpoint: str

    @property
    def settings(self) -> Any:
        return self.consumer.settings

    def caught_up(self, timeout: float = 240.0) -> None:
        """Wait until the lake holds one change for every record on the stream."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            expected = len(stream_contents(self.endpoint, self.consumer.stream_arn))
            if self.landed_changes() >= expected:
                return
            time.sleep(1.0)
        raise AssertionError("the consumer did not land every stream record in time")

    def landed_changes(self) -> int:
        rows = query_lake(self.settings, "SELECT count(DISTINCT event_id) FROM changes")
        return int(rows[0][0]) if rows else 0

    def audit(self) -> dict[str, Any]:
        lake = lake_from_settings(self.settings)
        snapshot(lake)
        report: AuditReport = run_audits(lake, load_config(policy=self.settings.policy))
        return {result.name: result for result in report.results}

    def link_outcomes(self) -> dict[tuple[str, str | None], int]:
        rows = query_lake(
            self.settings,
            "SELECT kind, detail, count(*) FROM outcomes WHERE kind LIKE 'link.%' GROUP BY 1, 2",
        )
        return {(str(kind), detail): int(n) for kind, detail, n in rows}


@pytest.fixture(scope="module")
def world(moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    hooks = Hooks()
    with (
        FakeArrayServer(hooks=hooks) as array,
        FakeTransactionsServer(hooks=hooks) as transactions,
    ):
        array.set_faults(call=PROCESSOR_TOKEN, latency_seconds=LATENCY)
        transactions.set_faults(latency_seconds=LATENCY)
        with running_consumer(
            moto_server.endpoint,
            tmp_path_factory.mktemp("race-kcl"),
            array={"base_url": array.url},
            service={"transactions_base_url": transactions.url, "outcome_flush_seconds": 0.5},
        ) as consumer:
            yield World(consumer, array, transactions, moto_server.endpoint)


def _run(world: World, *, seed: int, mix: Mix, unguarded: bool) -> tuple[WorkloadSummary, dict[str, int]]:
    config = WorkloadConfig(
        users=USERS, operations=OPERATIONS, clients=CLIENTS, seed=seed, contention=1.0, mix=mix
    )
    sink = compose.lake_handler(world.settings, name=f"race-{'unguarded' if unguarded else 'guarded'}")
    with local_service(world.settings, unguarded_links=unguarded, sink=sink) as running:
        summary = run_service_workload(config, running.url)
        overwritten = running.unguarded.snapshot() if running.unguarded is not None else {}
    return summary, overwritten


@pytest.fixture(scope="module")
def guarded(world: World) -> tuple[WorkloadSummary, dict[str, Any]]:
    mix = Mix(signup=3, cancel=1, reactivate=0.5, second_signup=2, relink=4)
    summary, _ = _run(world, seed=21, mix=mix, unguarded=False)
    world.caught_up()
    return summary, world.audit()


@pytest.fixture(scope="module")
def unguarded(
    world: World, guarded: tuple[WorkloadSummary, dict[str, Any]]
) -> tuple[dict[str, int], dict[str, Any]]:
    # No cancellations: every row the wrapper resurrects stays Active, so "now" counts them all.
    mix = Mix(signup=3, cancel=0, reactivate=0, second_signup=2, relink=4)
    _, overwritten = _run(world, seed=22, mix=mix, unguarded=True)
    world.caught_up()
    return overwritten, world.audit()


def test_race_with_save_if_active_refuses_at_least_ten_links_and_records_each_as_an_outcome(
    world: World, guarded: tuple[WorkloadSummary, dict[str, Any]]
) -> None:
    summary, _ = guarded
    outcomes = world.link_outcomes()
    refused_at_the_write = outcomes.get(("link.not_active", "save_refused"), 0)
    not_active = sum(n for (kind, _), n in outcomes.items() if kind == "link.not_active")
    assert refused_at_the_write >= AT_LEAST
    assert not_active == summary.relinks_rejected


def test_race_with_save_if_active_leaves_no_duplicate_active_rows_and_no_stale_writes(
    guarded: tuple[WorkloadSummary, dict[str, Any]],
) -> None:
    _, audit = guarded
    counts = {
        name: audit[name].count
        for name in ("duplicate_active_rows_ever", "duplicate_active_rows", "stale_write")
    }
    assert counts == {"duplicate_active_rows_ever": 0, "duplicate_active_rows": 0, "stale_write": 0}


def test_race_with_the_unguarded_write_overwrites_at_least_ten_rows(
    unguarded: tuple[dict[str, int], dict[str, Any]],
) -> None:
    overwritten, _ = unguarded
    assert overwritten["overwritten"] >= AT_LEAST


def test_race_with_the_unguarded_write_the_audit_counts_every_overwritten_row(
    unguarded: tuple[dict[str, int], dict[str, Any]],
) -> None:
    overwritten, audit = unguarded
    assert (audit["stale_write"].count, audit["duplicate_active_rows"].surplus_rows) == (
        overwritten["overwritten"],
        overwritten["overwritten"],
    )

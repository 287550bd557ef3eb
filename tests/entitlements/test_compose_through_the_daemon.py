"""The composition's promise through the real daemon and child: the cleanup processor hands its outcomes
to the lake (`feeds=("lake",)`), so an expiry's outcomes are in the lake before the shard's checkpoint
passes the expiry, whatever order the handlers are registered in.

The child is the real one with the composition's handlers re-registered in the order under test
(tests/support/reordered_child.py). The expiry is the last record the stream gets (its row is one GSI1
cannot find, so the cleanup writes nothing to the table): nothing after it would flush the lake, and an
outcome the lake had only buffered at the checkpoint would stay out of it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from analytics import connect, lake_from_settings
from devstack import _writes as writes
from devstack.fake_array import FakeArrayServer
from devstack.moto_server import MotoServer
from devstack.ttl_emulator import TtlEmulator
from pipeline.clock import SystemClock
from schema.outcomes import FINAL_CLEANUP_OUTCOMES
from schema.table import EntitlementStatus
from tests.support.daemon_log import child_entries
from tests.support.kcl import dynamodb, running_consumer, stream_contents
from tests.support.leases import checkpointed_past, only_shard
from tests.support.reordered_child import ORDERS, start_reordered_worker

pytestmark = pytest.mark.kcl

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], *, timeout: float = 240, interval: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


@pytest.mark.parametrize("order", ORDERS)
def test_an_expirys_outcome_is_in_the_lake_before_the_checkpoint_passes_it_whatever_the_registration_order(
    order: str, moto_server: MotoServer, tmp_path: Path
) -> None:
    endpoint = moto_server.endpoint
    with (
        FakeArrayServer() as array,
        running_consumer(
            endpoint,
            tmp_path / "state",
            worker_id="",
            array={"base_url": array.url, "retry_budget_seconds": 5.0, "max_attempts": 2},
        ) as consumer,
    ):
        start_reordered_worker(consumer, order)
        settings = consumer.settings
        table = settings.consumer.table_name
        emulator = TtlEmulator(
            SystemClock(), interval_seconds=0.2, lock=moto_server.dynamodb_lock, table_names=[table]
        )
        emulator.start()
        try:
            client = dynamodb(endpoint)
            user, account = f"user-{uuid.uuid4().hex[:8]}", f"arr-{uuid.uuid4().hex[:8]}"
            now = datetime.now(UTC)
            row = writes.entitlement_row(
                user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=now
            )
            row.pop("gsi1pk")
            row.pop("gsi1sk")
            client.put_item(**writes.signup_put(table, row))
            array.add_users([account])
            ttl = {"N": str(int(time.time()) + 4)}
            client.transact_write_items(
                TransactItems=writes.cancellation_transaction(table, user, account, ttl=ttl, now=now)
            )

            def expiry() -> dict[str, Any] | None:
                return next(
                    (r for r in stream_contents(endpoint, consumer.stream_arn) if r["eventName"] == "REMOVE"),
                    None,
                )

            removal = wait_for(expiry)
            shard = only_shard(endpoint, consumer.stream_arn)
            sequence = removal["dynamodb"]["SequenceNumber"]
            wait_for(
                lambda: checkpointed_past(endpoint, settings.consumer.application_name, shard, sequence),
                interval=0.2,
            )
            with connect(lake_from_settings(settings)) as con:
                at_checkpoint = con.execute(
                    "SELECT kind FROM outcomes WHERE source_event_id = ?", [removal["eventID"]]
                ).fetchall()
        finally:
            emulator.stop()

    log = settings.consumer.state_dir / "daemon" / "daemon-worker-1.log"
    (entry,) = {
        (tuple(e["registered"]), tuple(e["flushed"]))
        for e in child_entries(log)
        if e.get("msg") == "handlers registered"
    }
    registered, flushed = ([name for name in names if name in ("cleanup", "lake")] for names in entry)
    first = ["cleanup", "lake"] if order == "producers-first" else ["lake", "cleanup"]
    assert (registered, flushed) == (first, ["cleanup", "lake"])  # the child ran in the order under test
    assert array.deleted_users() == [account]
    assert [kind for (kind,) in at_checkpoint if kind in FINAL_CLEANUP_OUTCOMES] == ["cleanup.deleted"]

"""The composition's promise through the real daemon and child: the cleanup processor hands its outcomes
to the lake (`feeds=("lake",)`), so when the shard's checkpoint passes an expiry, the expiry's outcome
is in the lake, or, while the lake cannot be written, the expiry is in the cleanup's parked work;
whatever order the handlers are registered in.

The child is the real one with the composition's handlers re-registered in the order under test
(tests/support/reordered_child.py). The expiry is the last record the stream gets (its row is one GSI1
cannot find, so the cleanup writes nothing to the table): nothing after it would flush the lake, and an
outcome the lake had only buffered at the checkpoint would stay out of it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from devstack import _writes as writes
from devstack.fake_array import FakeArrayServer
from devstack.moto_server import MotoServer
from pipeline.parking import ParkedWork
from schema.outcomes import FINAL_CLEANUP_OUTCOMES
from schema.table import EntitlementStatus
from tests.support.daemon_log import child_entries
from tests.support.kcl import RunningConsumer, dynamodb, running_consumer, stream_contents, ttl_emulator
from tests.support.lake import query_lake
from tests.support.leases import checkpointed_past, only_shard
from tests.support.polling import wait_for
from tests.support.reordered_child import ORDERS, start_reordered_worker

pytestmark = pytest.mark.kcl


@dataclass
class Stack:
    consumer: RunningConsumer
    array: FakeArrayServer
    endpoint: str

    @property
    def table(self) -> str:
        return self.consumer.settings.consumer.table_name

    def signup(self, user: str, account: str, *, gsi1: bool = True) -> None:
        row = writes.entitlement_row(
            user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=datetime.now(UTC)
        )
        if not gsi1:
            row.pop("gsi1pk")
            row.pop("gsi1sk")
        dynamodb(self.endpoint).put_item(**writes.signup_put(self.table, row))
        self.array.add_users([account])

    def expire(self) -> tuple[str, dict[str, Any]]:
        """A cancellation that expires at once, on a row GSI1 cannot find: the stream's last record.
        Returns the account and the TTL removal, read back from the stream, once the shard's checkpoint
        has passed it."""
        user, account = f"user-{uuid.uuid4().hex[:8]}", f"arr-{uuid.uuid4().hex[:8]}"
        self.signup(user, account, gsi1=False)
        ttl = {"N": str(int(time.time()) + 4)}
        dynamodb(self.endpoint).transact_write_items(
            TransactItems=writes.cancellation_transaction(
                self.table, user, account, ttl=ttl, now=datetime.now(UTC)
            )
        )

        def removal() -> dict[str, Any] | None:
            return next(
                (
                    r
                    for r in stream_contents(self.endpoint, self.consumer.stream_arn)
                    if r["eventName"] == "REMOVE"
                ),
                None,
            )

        record = wait_for(removal, timeout=240)
        shard = only_shard(self.endpoint, self.consumer.stream_arn)
        sequence = record["dynamodb"]["SequenceNumber"]
        application = self.consumer.settings.consumer.application_name
        wait_for(
            lambda: checkpointed_past(self.endpoint, application, shard, sequence), interval=0.2, timeout=240
        )
        return account, record

    def final_outcomes(self, source_event_id: str) -> list[str]:
        rows = query_lake(
            self.consumer.settings, "SELECT kind FROM outcomes WHERE source_event_id = ?", [source_event_id]
        )
        return [str(kind) for (kind,) in rows if kind in FINAL_CLEANUP_OUTCOMES]

    def parked_for_cleanup(self) -> set[str]:
        parked = ParkedWork(self.consumer.settings.consumer.parked_dir)
        return {
            record.sequence_number
            for batch in parked
            if batch.handler == "cleanup"
            for record in batch.records
        }

    def registration(self) -> tuple[list[str], list[str]]:
        """(registration order, flush order) of the cleanup and the lake, as the child logged them."""
        log = self.consumer.settings.consumer.state_dir / "daemon" / "daemon-worker-1.log"
        (entry,) = {
            (tuple(e["registered"]), tuple(e["flushed"]))
            for e in child_entries(log)
            if e.get("msg") == "handlers registered"
        }
        registered, flushed = ([name for name in names if name in ("cleanup", "lake")] for names in entry)
        return registered, flushed


@contextmanager
def stack_in_order(order: str, moto_server: MotoServer, state: Path, **consumer: Any) -> Iterator[Stack]:
    with (
        FakeArrayServer() as array,
        running_consumer(
            moto_server.endpoint,
            state,
            worker_id="",
            array={"base_url": array.url, "retry_budget_seconds": 5.0, "max_attempts": 2},
            consumer=consumer,
        ) as running,
    ):
        start_reordered_worker(running, order)
        with ttl_emulator(moto_server, running):
            yield Stack(running, array, moto_server.endpoint)


def registered_first(order: str) -> list[str]:
    return ["cleanup", "lake"] if order == "producers-first" else ["lake", "cleanup"]


@pytest.mark.parametrize("order", ORDERS)
def test_an_expirys_outcome_is_in_the_lake_before_the_checkpoint_passes_it_whatever_the_registration_order(
    order: str, moto_server: MotoServer, tmp_path: Path
) -> None:
    with stack_in_order(order, moto_server, tmp_path / "state") as stack:
        account, removal = stack.expire()
        at_checkpoint = stack.final_outcomes(removal["eventID"])

    assert stack.registration() == (registered_first(order), ["cleanup", "lake"])
    assert stack.array.deleted_users() == [account]
    assert at_checkpoint == ["cleanup.deleted"]


@pytest.mark.parametrize("order", ORDERS)
def test_with_the_lake_failing_an_expiry_is_parked_before_the_checkpoint_passes_it_whatever_the_order(
    order: str, moto_server: MotoServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    blocker = state / "lake" / "changes"  # a file where the lake's change log folder must be
    blocker.parent.mkdir(parents=True)
    blocker.write_text("the lake cannot write here")
    retry = {"handler_retry_attempts": 2, "handler_retry_max_seconds": 1.0}
    with stack_in_order(order, moto_server, state, **retry) as stack:
        account, removal = stack.expire()
        parked_at_checkpoint = stack.parked_for_cleanup()

        blocker.unlink()  # the lake works again; the next window's flush writes what it kept
        stack.signup(f"user-{uuid.uuid4().hex[:8]}", f"arr-{uuid.uuid4().hex[:8]}")
        landed = wait_for(lambda: stack.final_outcomes(removal["eventID"]), timeout=240)

    assert stack.registration() == (registered_first(order), ["cleanup", "lake"])
    assert stack.array.deleted_users() == [account]
    assert removal["dynamodb"]["SequenceNumber"] in parked_at_checkpoint
    assert landed == ["cleanup.deleted"]

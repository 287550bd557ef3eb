"""Cleanup end to end: table writes -> TTL expiry (emulated) -> the real KCL daemon -> the cleanup handler
-> the fake Array and the table; outcomes read back from the lake."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from devstack import _writes as writes
from devstack.fake_array import FakeArrayServer
from devstack.moto_server import MotoServer
from schema.clock import Clock, clock_from_settings
from schema.table import EntitlementStatus, entitlement_key
from tests.support.kcl import RunningConsumer, dynamodb, running_consumer, ttl_emulator
from tests.support.lake import query_lake
from tests.support.polling import wait_for

pytestmark = pytest.mark.kcl

# 63 simulated days pass in about 6 real seconds; one day in a tenth of a second.
SPEED = 63 * 86_400 / 6


@dataclass
class CleanupStack:
    consumer: RunningConsumer
    array: FakeArrayServer
    clock: Clock
    client: Any

    @property
    def table(self) -> str:
        return self.consumer.settings.consumer.table_name

    def transact(self, items: list[dict[str, Any]]) -> None:
        self.client.transact_write_items(TransactItems=items)

    def signup(self, user: str, account: str, *, register: bool = True, gsi1: bool = True) -> None:
        row = writes.entitlement_row(
            user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=self.clock.now()
        )
        if not gsi1:  # a row GSI1 cannot find: the seed's "GSI1 lookup fails" case
            row.pop("gsi1pk")
            row.pop("gsi1sk")
        self.client.put_item(**writes.signup_put(self.table, row))
        if register:
            self.array.add_users([account])

    def cancel(self, user: str, account: str) -> None:
        now = self.clock.now()
        ttl = {"N": str(writes.ttl_after(now, 63))}
        self.transact(writes.cancellation_transaction(self.table, user, account, ttl=ttl, now=now))

    def reactivate(self, user: str, account: str) -> None:
        self.transact(writes.reactivation_transaction(self.table, user, account, now=self.clock.now()))

    def second_signup(self, user: str, old: str, new: str) -> None:
        now = self.clock.now()
        ttl = {"N": str(writes.ttl_after(now, 1))}
        self.array.add_users([new])
        row = writes.entitlement_row(
            user, new, status=EntitlementStatus.ACTIVE, processor_token="tok2", now=now
        )
        self.transact(
            writes.second_signup_transaction(
                self.table, user, old_array_account_id=old, new_row=row, stale_ttl=ttl, now=now
            )
        )

    def status(self, user: str, account: str) -> str:
        key = {k: {"S": v} for k, v in entitlement_key(user, account).items()}
        item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True)["Item"]
        return str(item["status"]["S"])

    def outcomes(self, account: str) -> list[str]:
        # A lake the consumer has not committed to yet holds no outcomes yet (query_lake), not an error.
        rows = query_lake(
            self.consumer.settings,
            "SELECT kind FROM outcomes WHERE array_account_id = ? ORDER BY occurred_at",
            [account],
        )
        return [str(row[0]) for row in rows]

    def wait(self, condition: Callable[[], bool], timeout: float = 120) -> None:
        wait_for(condition, timeout=timeout)


@pytest.fixture(scope="module")
def stack(moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CleanupStack]:
    now = datetime.now(UTC)
    clock_settings = {"start": now.isoformat(), "anchor": now.isoformat(), "speed": SPEED}
    with (
        FakeArrayServer() as array,
        running_consumer(
            moto_server.endpoint,
            tmp_path_factory.mktemp("cleanup-kcl"),
            clock=clock_settings,
            array={"base_url": array.url, "retry_budget_seconds": 5.0, "max_attempts": 2},
        ) as consumer,
    ):
        clock = clock_from_settings(consumer.settings.clock)
        with ttl_emulator(moto_server, consumer, clock):
            yield CleanupStack(consumer, array, clock, dynamodb(moto_server.endpoint))


def ids() -> tuple[str, str]:
    return f"user-{uuid.uuid4().hex[:8]}", f"arr-{uuid.uuid4().hex[:8]}"


def test_cleanup_after_a_cancellation_expires_deletes_the_account_and_marks_the_row_removed(
    stack: CleanupStack,
) -> None:
    user, account = ids()
    stack.signup(user, account)
    stack.cancel(user, account)
    stack.wait(lambda: account in stack.array.deleted_users())
    stack.wait(lambda: stack.status(user, account) == "Removed")
    stack.wait(lambda: "cleanup.row_marked" in stack.outcomes(account))
    assert "cleanup.deleted" in stack.outcomes(account)


def test_cleanup_never_runs_for_a_cancellation_undone_by_reactivation(stack: CleanupStack) -> None:
    user, account = ids()
    stack.signup(user, account)
    stack.cancel(user, account)
    stack.reactivate(user, account)
    # A marker cancellation on another user expires after this one would have: once it is cleaned up,
    # the reactivated user's would have been too.
    marker_user, marker_account = ids()
    stack.signup(marker_user, marker_account)
    stack.cancel(marker_user, marker_account)
    stack.wait(lambda: stack.status(marker_user, marker_account) == "Removed")
    assert stack.array.calls_for(account) == []
    assert stack.status(user, account) == "Active"
    journal = stack.consumer.events()
    cancelled = [
        e for e in journal if e["keys"]["pk"] == f"USER#{user}" and e["event_type"] == "cleanup.cancelled"
    ]
    assert len(cancelled) == 1
    assert cancelled[0]["ttl_deletion"] is False


def test_cleanup_after_a_second_signup_deletes_only_the_superseded_account(stack: CleanupStack) -> None:
    user, old = ids()
    new = f"arr-{uuid.uuid4().hex[:8]}"
    stack.signup(user, old)
    stack.second_signup(user, old, new)
    stack.wait(lambda: old in stack.array.deleted_users())
    stack.wait(lambda: stack.status(user, old) == "Removed")
    assert stack.array.calls_for(new) == []
    assert stack.array.has_user(new)
    assert stack.status(user, new) == "Active"
    expired = [
        e
        for e in stack.consumer.events()
        if e["event_type"] == "cleanup.expired" and e["keys"]["sk"].endswith(old)
    ]
    assert expired and all(e["ttl_deletion"] for e in expired)


def test_cleanup_counts_arrays_404_as_success(stack: CleanupStack) -> None:
    user, account = ids()
    stack.signup(user, account, register=False)  # Array no longer knows the account
    stack.cancel(user, account)
    stack.wait(lambda: stack.status(user, account) == "Removed")
    # The row is marked before the batch's outcomes are committed to the lake, so they are waited for.
    stack.wait(lambda: "cleanup.already_deleted" in stack.outcomes(account))
    assert [call.status for call in stack.array.calls_for(account)] == [404]


def test_cleanup_records_a_failed_gsi1_step_and_leaves_the_row_as_it_was(stack: CleanupStack) -> None:
    user, account = ids()
    stack.signup(user, account, gsi1=False)
    stack.cancel(user, account)
    stack.wait(lambda: account in stack.array.deleted_users())
    stack.wait(lambda: "cleanup.mark_failed" in stack.outcomes(account))
    assert stack.status(user, account) == "Cancelled"

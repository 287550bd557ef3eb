"""ERASE and CHECK by ACCOUNT without the queue (`AccountErasure` on moto and the fake Array): the order
keeps the map to what remains, a failed step leaves the rest for redelivery, a repeated pass is harmless,
and CHECK answers CANNOT_ANSWER when a part cannot be read."""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from devstack.fake_array import FakeArrayServer
from pipeline.quarantine import Quarantine
from processors.erasure import ErasureTargets
from processors.erasure._bounded import BoundedCalls, Deadline
from processors.erasure._errors import ErasureStepError, ErasureTimeoutError
from processors.erasure._lake import LakeTableScan
from processors.erasure._procedure import AccountErasure
from schema.clock import SystemClock
from schema.table import user_pk
from tests.processors.erasure.erasure_subscriber_helpers import cleanup_item, entitlement_item


class BrokenLake:
    """A lake that cannot be read or written."""

    def mask(self, user_ids: Collection[str]) -> None:
        raise OSError("disk")

    def purge(self, user_ids: Collection[str]) -> Mapping[str, Mapping[str, int]]:
        raise OSError("disk")

    def unmask(self, user_ids: Collection[str]) -> None:
        raise OSError("disk")

    def holds(self, user_id: str) -> bool | None:
        return None

    def traces_for(
        self, user_ids: Collection[str], *, until: float | None = None
    ) -> Mapping[str, LakeTableScan | None]:
        raise OSError("disk")


class SlowLake(BrokenLake):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def mask(self, user_ids: Collection[str]) -> None:
        return None

    def purge(self, user_ids: Collection[str]) -> Mapping[str, Mapping[str, int]]:
        time.sleep(self.seconds)
        return {}


@pytest.fixture
def calls() -> Iterator[BoundedCalls]:
    with BoundedCalls() as bounded:
        yield bounded


def _erasure(targets: ErasureTargets, calls: BoundedCalls, batch: float = 2.0) -> AccountErasure:
    return AccountErasure(targets, calls, batch_timeout=batch, clock=SystemClock())


def _seed(dynamodb: Any, table: Any, fake_array: FakeArrayServer) -> tuple[str, list[str]]:
    user = f"user-{uuid.uuid4().hex[:8]}"
    accounts = [f"arr-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for item in (
        entitlement_item(user, accounts[0], "Active"),
        entitlement_item(user, accounts[1], "Superseded"),
        cleanup_item(user, accounts[1], cancellation=False),
    ):
        dynamodb.put_item(TableName=table.table_name, Item=item)
    fake_array.add_users(accounts)
    return user, accounts


def _items(dynamodb: Any, table: Any, user: str) -> list[dict[str, Any]]:
    return dynamodb.query(
        TableName=table.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": user_pk(user)}},
        ConsistentRead=True,
    )["Items"]


def test_array_accounts_go_before_the_rows_that_name_them(
    targets: ErasureTargets, calls: BoundedCalls, dynamodb: Any, table: Any, fake_array: FakeArrayServer
) -> None:
    user, accounts = _seed(dynamodb, table, fake_array)
    fake_array.set_faults(error_rate=1.0)
    results = _erasure(targets, calls).erase([user], Deadline(5))
    error = results[user]
    assert isinstance(error, ErasureStepError) and error.step == "array"
    assert len(_items(dynamodb, table, user)) == 3  # the map to the Array accounts is kept
    assert targets.ledger.is_erased(user)  # the landing already drops the account's events
    fake_array.clear_faults()
    assert _erasure(targets, calls).erase([user], Deadline(5)) == {user: None}
    assert _items(dynamodb, table, user) == []
    assert not any(fake_array.has_user(account) for account in accounts)


def test_a_repeated_pass_is_harmless(
    targets: ErasureTargets, calls: BoundedCalls, dynamodb: Any, table: Any, fake_array: FakeArrayServer
) -> None:
    user, _ = _seed(dynamodb, table, fake_array)
    erasure = _erasure(targets, calls)
    assert erasure.erase([user], Deadline(5)) == {user: None}
    assert erasure.erase([user], Deadline(5)) == {user: None}
    assert _items(dynamodb, table, user) == []


def test_a_lake_that_cannot_be_written_fails_the_pass_after_the_table(
    targets: ErasureTargets, calls: BoundedCalls, dynamodb: Any, table: Any, fake_array: FakeArrayServer
) -> None:
    user, _ = _seed(dynamodb, table, fake_array)
    results = _erasure(replace(targets, lake=BrokenLake()), calls).erase([user], Deadline(5))
    error = results[user]
    assert isinstance(error, ErasureStepError) and (error.step, error.code) == ("lake-mask", "OSError")


def test_a_purge_longer_than_the_batch_timeout_fails_the_pass(
    targets: ErasureTargets, calls: BoundedCalls, dynamodb: Any, table: Any, fake_array: FakeArrayServer
) -> None:
    user, _ = _seed(dynamodb, table, fake_array)
    results = _erasure(replace(targets, lake=SlowLake(1.0)), calls, batch=0.2).erase([user], Deadline(5))
    error = results[user]
    assert isinstance(error, ErasureTimeoutError) and error.step == "lake-purge"


def test_no_step_starts_once_the_handler_timeout_has_passed(
    targets: ErasureTargets, calls: BoundedCalls, dynamodb: Any, table: Any, fake_array: FakeArrayServer
) -> None:
    user, accounts = _seed(dynamodb, table, fake_array)
    results = _erasure(targets, calls).erase([user], Deadline(0))
    assert isinstance(results[user], ErasureTimeoutError)
    assert len(_items(dynamodb, table, user)) == 3
    assert all(fake_array.has_user(account) for account in accounts)


def test_check_holds_data_while_the_table_holds_a_row(
    targets: ErasureTargets, calls: BoundedCalls, dynamodb: Any, table: Any, fake_array: FakeArrayServer
) -> None:
    user, _ = _seed(dynamodb, table, fake_array)
    assert _erasure(targets, calls).holdings(user, Deadline(5)) == "HOLDS_DATA"
    assert _erasure(replace(targets, lake=BrokenLake()), calls).holdings(user, Deadline(5)) == "HOLDS_DATA"


def test_check_cannot_answer_when_the_lake_cannot_be_read(
    targets: ErasureTargets, calls: BoundedCalls
) -> None:
    erasure = _erasure(replace(targets, lake=BrokenLake()), calls)
    assert erasure.holdings("nobody-here", Deadline(5)) == "CANNOT_ANSWER"


def test_check_cannot_answer_when_the_table_cannot_be_read(
    targets: ErasureTargets, calls: BoundedCalls
) -> None:
    erasure = _erasure(replace(targets, table_name="no-such-table"), calls)
    assert erasure.holdings("nobody-here", Deadline(5)) == "CANNOT_ANSWER"


def test_check_holds_none_for_an_account_this_store_never_had(
    targets: ErasureTargets, calls: BoundedCalls
) -> None:
    assert _erasure(targets, calls).holdings("nobody-here", Deadline(5)) == "HOLDS_NONE"


def test_a_stored_record_naming_only_an_array_account_the_rows_named_is_erased(
    targets: ErasureTargets,
    calls: BoundedCalls,
    dynamodb: Any,
    table: Any,
    fake_array: FakeArrayServer,
    state_dir: Path,
) -> None:
    user, accounts = _seed(dynamodb, table, fake_array)
    quarantine = Quarantine(state_dir / "quarantine")
    for number, account in enumerate((accounts[0], "arr-of-someone-else"), start=1):
        quarantine.put(
            raw=f'{{"Keys": {{"sk": {{"S": "ENTITLEMENT#{account}"}}}}, "broken'.encode(),
            reason="r",
            stream_arn="arn:aws:dynamodb:eu-west-1:000000000000:table/t/stream/x",
            shard_id="shardId-1",
            sequence_number=str(number),
        )
    assert _erasure(targets, calls).erase([user], Deadline(5)) == {user: None}
    assert [record.sequence_number for record in quarantine] == ["2"]

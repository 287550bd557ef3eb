"""A cancellation never takes away another account's cleanup schedule (service/writes.py, docs/table.md
"The cleanup-record puts"): the earlier service's second signup whose retire was refused kept its new
row beside the cancellation record of the row a cancellation had just cancelled (the guard now refuses
that write: such a partition is left from before, planted here); cancelling that new row moves the
earlier account onto its stale key in the same transaction, instead of overwriting its record."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient

from schema.table_writes import cancellation_record, entitlement_row
from tests.service.conftest import NOW, World

_ONE_DAY_TTL = int((NOW + timedelta(days=1)).timestamp())
_CANCELLATION_TTL = int((NOW + timedelta(days=63)).timestamp())


def _kept_beside_a_cancellation(world: World, client: TestClient, user: str) -> tuple[str, str]:
    """The hole's state: the old row Cancelled with its record, the new row Active beside it."""
    old = client.post(f"/{user}/signup").json()["arrayAccountId"]
    assert client.post(f"/{user}/cancellation").status_code == 200
    new = f"array-kept-{user}"
    world.dynamodb.put_item(TableName=world.table_name, Item=entitlement_row(user, new, now=NOW))
    return old, new


def _record(world: World, user: str, sk: str) -> dict[str, Any]:
    item = world.item(f"USER#{user}", sk)
    assert item is not None
    return item


def test_cancelling_the_new_row_schedules_the_earlier_cancelled_account_on_its_stale_key(
    world: World,
) -> None:
    with world.client() as client:
        old, _ = _kept_beside_a_cancellation(world, client, "u-1")
        answer = client.post("/u-1/cancellation")
    assert answer.status_code == 200
    stale = _record(world, "u-1", f"CLEANUP#STALE#{old}")
    assert (stale["arrayAccountId"]["S"], int(stale["ttl"]["N"])) == (old, _ONE_DAY_TTL)


def test_cancelling_the_new_row_gives_the_cancellation_record_to_the_new_account(world: World) -> None:
    with world.client() as client:
        _, new = _kept_beside_a_cancellation(world, client, "u-1")
        client.post("/u-1/cancellation")
    record = _record(world, "u-1", "CLEANUP#CANCELLATION")
    assert (record["arrayAccountId"]["S"], int(record["ttl"]["N"])) == (new, _CANCELLATION_TTL)
    assert world.status("u-1", new) == "Cancelled"


def test_a_reactivation_after_it_brings_the_new_row_back_and_the_earlier_account_stays_scheduled(
    world: World,
) -> None:
    with world.client() as client:
        old, new = _kept_beside_a_cancellation(world, client, "u-1")
        client.post("/u-1/cancellation")
        answer = client.post("/u-1/reactivation")
    assert (answer.status_code, answer.json()["arrayAccountId"]) == (200, new)
    assert (world.status("u-1", new), world.status("u-1", old)) == ("Active", "Cancelled")
    assert world.item("USER#u-1", f"CLEANUP#STALE#{old}") is not None


def test_a_record_naming_another_account_written_after_the_read_is_read_again_never_overwritten(
    world: World,
) -> None:
    other = "array-written-meanwhile"

    def meanwhile() -> None:  # another writer's record lands between the service's read and write
        record = cancellation_record("u-1", other, ttl=_CANCELLATION_TTL, now=NOW)
        world.dynamodb.put_item(TableName=world.table_name, Item=record)

    with world.client() as client:
        client.post("/u-1/signup")
        world.counting.before_transact = meanwhile
        answer = client.post("/u-1/cancellation")
    assert answer.status_code == 200
    assert _record(world, "u-1", f"CLEANUP#STALE#{other}")["arrayAccountId"]["S"] == other


def test_a_record_changing_before_every_write_is_a_409_concurrent_request_writing_nothing(
    world: World,
) -> None:
    written: list[str] = []

    def meanwhile() -> None:  # re-armed: a record naming yet another account before every write
        other = f"array-meanwhile-{len(written)}"
        written.append(other)
        record = cancellation_record("u-1", other, ttl=_CANCELLATION_TTL, now=NOW)
        world.dynamodb.put_item(TableName=world.table_name, Item=record)
        world.counting.before_transact = meanwhile

    with world.client() as client:
        account = client.post("/u-1/signup").json()["arrayAccountId"]
        world.counting.before_transact = meanwhile
        answer = client.post("/u-1/cancellation")
    world.counting.before_transact = None
    assert (answer.status_code, answer.json()["error"]) == (409, "concurrent_request")
    assert world.status("u-1", account) == "Active"
    assert _record(world, "u-1", "CLEANUP#CANCELLATION")["arrayAccountId"]["S"] == written[-1]


def test_cancelling_again_after_a_failed_reactivation_delete_keeps_its_own_account_record(
    world: World,
) -> None:
    """A record naming the row's own account (a reactivation whose delete failed: planted on the local
    stack) is replaced: the same account stays scheduled, nothing moves to a stale key."""
    with world.client() as client:
        account = client.post("/u-1/signup").json()["arrayAccountId"]
        leftover = cancellation_record("u-1", account, ttl=1, now=NOW)
        world.dynamodb.put_item(TableName=world.table_name, Item=leftover)
        answer = client.post("/u-1/cancellation")
    assert answer.status_code == 200
    record = _record(world, "u-1", "CLEANUP#CANCELLATION")
    assert (record["arrayAccountId"]["S"], int(record["ttl"]["N"])) == (account, _CANCELLATION_TTL)
    assert world.item("USER#u-1", f"CLEANUP#STALE#{account}") is None

"""The workload simulator: the service's documented writes, guard rejections and planted faults."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from devstack.direct_writes import DirectWrites, NotActiveRefused
from devstack.planted_faults import CANARY_TOKEN_PREFIX, FaultKind, PlantedFault, plant_faults
from devstack.simulator import run_simulation
from devstack.streams import read_stream
from devstack.ttl_emulator import TtlEmulator
from devstack.workload import Answered, Mix, OperationAnswer, SimulationConfig, SimulationSummary
from pipeline.tables import TableDescription, create_table
from schema.clock import Clock
from schema.errors import RetryableError, TerminalError
from schema.table import parse_item
from tests.support.dynamodb import FixedClock, get_item, items_of, unique_table_name

NOW = datetime(2030, 6, 1, tzinfo=UTC)
NOW_EPOCH = int(NOW.timestamp())
STAMP = "2030-06-01T00:00:00.000Z"
DAY = 86400


def only(**weights: float) -> Mix:
    return Mix(
        **{"signup": 0.0, "cancel": 0.0, "reactivate": 0.0, "second_signup": 0.0, "relink": 0.0, **weights}
    )


class Spy:
    """A client that records the calls made through it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def call(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return method(**kwargs)

        return call


def simulate(
    client: Any, table: TableDescription, clock: Clock | None = None, **config: Any
) -> SimulationSummary:
    settings = SimulationConfig(table_name=table.table_name, **config)
    return run_simulation(settings, DirectWrites(client, table.table_name), clock or FixedClock(NOW))


def rows(dynamodb: Any, table: TableDescription) -> list[dict[str, Any]]:
    return [i for i in items_of(dynamodb, table.table_name) if i["sk"]["S"].startswith("ENTITLEMENT#")]


def records(dynamodb: Any, table: TableDescription, prefix: str) -> list[dict[str, Any]]:
    return [i for i in items_of(dynamodb, table.table_name) if i["sk"]["S"].startswith(prefix)]


def kinds(stream_records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["eventName"], r["dynamodb"]["Keys"]["sk"]["S"].split("#")[0]) for r in stream_records]


def planted(summary: SimulationSummary, kind: FaultKind) -> PlantedFault:
    (fault,) = [f for f in summary.planted_faults if f.kind is kind]
    return fault


def item_of(dynamodb: Any, table: TableDescription, fault: PlantedFault, role: str) -> dict[str, Any]:
    (key,) = [i for i in fault.items if i.role == role]
    item = get_item(dynamodb, table.table_name, key.pk, key.sk)
    assert item is not None
    return item


def active_row(user: str, account: str, token: str = "ptok-x") -> dict[str, Any]:
    return {
        "pk": {"S": f"USER#{user}"},
        "sk": {"S": f"ENTITLEMENT#{account}"},
        "userId": {"S": user},
        "arrayAccountId": {"S": account},
        "status": {"S": "Active"},
        "processorToken": {"S": token},
        "gsi1pk": {"S": f"ARRAY#{account}"},
        "gsi1sk": {"S": "ENTITLEMENT"},
    }


def set_status(dynamodb: Any, table: TableDescription, item: dict[str, Any], status: str) -> None:
    dynamodb.put_item(TableName=table.table_name, Item={**item, "status": {"S": status}})


# ---- signup --------------------------------------------------------------------------------------


def test_signup_puts_a_fresh_active_row_with_a_processor_token(
    dynamodb: Any, table: TableDescription
) -> None:
    simulate(dynamodb, table, users=1, operations=1, mix=only(signup=1))
    (row,) = rows(dynamodb, table)
    assert (row["status"]["S"], row["processorToken"]["S"].startswith("ptok-")) == ("Active", True)


def test_signup_row_follows_the_table_contract(dynamodb: Any, table: TableDescription) -> None:
    simulate(dynamodb, table, users=1, operations=1, mix=only(signup=1))
    (row,) = rows(dynamodb, table)
    user, account = row["userId"]["S"], row["arrayAccountId"]["S"]
    assert (row["pk"]["S"], row["sk"]["S"], row["gsi1pk"]["S"], row["gsi1sk"]["S"]) == (
        f"USER#{user}",
        f"ENTITLEMENT#{account}",
        f"ARRAY#{account}",
        "ENTITLEMENT",
    )


def test_signup_timestamps_come_from_the_shared_clock(dynamodb: Any, table: TableDescription) -> None:
    simulate(dynamodb, table, users=1, operations=1, mix=only(signup=1))
    (row,) = rows(dynamodb, table)
    assert (row["createdAt"]["S"], row["updatedAt"]["S"]) == (STAMP, STAMP)


def test_signup_is_one_unconditional_put(dynamodb: Any, table: TableDescription) -> None:
    spy = Spy(dynamodb)
    simulate(spy, table, users=1, operations=1, mix=only(signup=1))
    ((name, request),) = spy.calls
    assert (name, "ConditionExpression" in request) == ("put_item", False)


def test_signup_reaches_the_stream_as_one_insert(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    simulate(dynamodb, table, users=1, operations=1, mix=only(signup=1))
    assert kinds(read_stream(streams, table.stream_arn)) == [("INSERT", "ENTITLEMENT")]


def test_a_signup_row_is_found_through_gsi1_by_its_array_account(
    dynamodb: Any, table: TableDescription
) -> None:
    simulate(dynamodb, table, users=1, operations=2, mix=only(signup=1, cancel=1))
    (row,) = rows(dynamodb, table)
    found = dynamodb.query(
        TableName=table.table_name,
        IndexName="GSI1",
        KeyConditionExpression="gsi1pk = :a",
        ExpressionAttributeValues={":a": {"S": f"ARRAY#{row['arrayAccountId']['S']}"}},
    )["Items"]
    assert [i["sk"]["S"] for i in found] == [row["sk"]["S"]]  # the cleanup record naming it is not in GSI1


# ---- cancellation --------------------------------------------------------------------------------


def test_cancellation_marks_the_row_cancelled(dynamodb: Any, table: TableDescription) -> None:
    simulate(dynamodb, table, users=1, operations=2, mix=only(signup=1, cancel=1))
    (row,) = rows(dynamodb, table)
    assert row["status"]["S"] == "Cancelled"


def test_cancellation_schedules_cleanup_on_the_cancellation_key_naming_the_account(
    dynamodb: Any, table: TableDescription
) -> None:
    simulate(dynamodb, table, users=1, operations=2, mix=only(signup=1, cancel=1))
    (row,) = rows(dynamodb, table)
    (record,) = records(dynamodb, table, "CLEANUP#")
    assert (record["pk"], record["sk"]["S"], record["arrayAccountId"]) == (
        row["pk"],
        "CLEANUP#CANCELLATION",
        row["arrayAccountId"],
    )


def test_cancellation_ttl_is_now_plus_cleanup_ttl_days_in_epoch_seconds(
    dynamodb: Any, table: TableDescription
) -> None:
    simulate(dynamodb, table, users=1, operations=2, mix=only(signup=1, cancel=1), cleanup_ttl_days=63)
    (record,) = records(dynamodb, table, "CLEANUP#")
    assert record["ttl"] == {"N": str(NOW_EPOCH + 63 * DAY)}


def test_cancellation_is_one_transaction_of_the_row_and_the_record(
    dynamodb: Any, table: TableDescription
) -> None:
    spy = Spy(dynamodb)
    simulate(spy, table, users=1, operations=2, mix=only(signup=1, cancel=1))
    name, request = spy.calls[-1]
    assert (name, [next(iter(op)) for op in request["TransactItems"]]) == (
        "transact_write_items",
        ["Update", "Put"],
    )


def test_cancellation_reaches_the_stream_as_a_row_modify_and_a_record_insert(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    simulate(dynamodb, table, users=1, operations=2, mix=only(signup=1, cancel=1))
    assert sorted(kinds(read_stream(streams, table.stream_arn))[1:]) == [
        ("INSERT", "CLEANUP"),
        ("MODIFY", "ENTITLEMENT"),
    ]


# ---- reactivation --------------------------------------------------------------------------------


def test_reactivation_makes_the_row_active_again(dynamodb: Any, table: TableDescription) -> None:
    simulate(dynamodb, table, users=1, operations=3, mix=only(signup=1, cancel=1, reactivate=1))
    (row,) = rows(dynamodb, table)
    assert row["status"]["S"] == "Active"


def test_reactivation_deletes_the_cancellation_record(dynamodb: Any, table: TableDescription) -> None:
    simulate(dynamodb, table, users=1, operations=3, mix=only(signup=1, cancel=1, reactivate=1))
    assert records(dynamodb, table, "CLEANUP#") == []


def test_reactivation_is_one_transaction_of_the_delete_and_the_row(
    dynamodb: Any, table: TableDescription
) -> None:
    spy = Spy(dynamodb)
    simulate(spy, table, users=1, operations=3, mix=only(signup=1, cancel=1, reactivate=1))
    name, request = spy.calls[-1]
    assert (name, [next(iter(op)) for op in request["TransactItems"]]) == (
        "transact_write_items",
        ["Delete", "Update"],
    )


def test_the_reactivation_delete_reaches_the_stream_without_an_identity(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    simulate(dynamodb, table, users=1, operations=3, mix=only(signup=1, cancel=1, reactivate=1))
    (removal,) = [r for r in read_stream(streams, table.stream_arn) if r["eventName"] == "REMOVE"]
    assert (removal["dynamodb"]["Keys"]["sk"]["S"], "userIdentity" in removal) == (
        "CLEANUP#CANCELLATION",
        False,
    )


class JumpingClock:
    """Each reading is 64 days after the one before: every cancellation has expired by the next."""

    def __init__(self) -> None:
        self.current = NOW

    def now(self) -> datetime:
        self.current += timedelta(days=64)
        return self.current


def test_a_cancellation_past_its_ttl_is_never_reactivated(dynamodb: Any, table: TableDescription) -> None:
    summary = simulate(
        dynamodb, table, JumpingClock(), users=1, operations=4, mix=only(signup=1, cancel=1, reactivate=1)
    )
    assert (summary.operations["reactivate"], summary.idle) == (0, 2)


# ---- second Array signup -------------------------------------------------------------------------


def test_second_signup_adds_an_active_row_and_supersedes_the_old_one(
    dynamodb: Any, table: TableDescription
) -> None:
    simulate(dynamodb, table, users=1, operations=2, mix=only(signup=1, second_signup=1))
    assert sorted(r["status"]["S"] for r in rows(dynamodb, table)) == ["Active", "Superseded"]


def test_second_signup_schedules_the_old_account_on_a_key_ending_in_it(
    dynamodb: Any, table: TableDescription
) -> None:
    simulate(dynamodb, table, users=1, operations=2, mix=only(signup=1, second_signup=1))
    (old,) = [r for r in rows(dynamodb, table) if r["status"]["S"] == "Superseded"]
    (record,) = records(dynamodb, table, "CLEANUP#")
    account = old["arrayAccountId"]["S"]
    assert (record["sk"]["S"], record["arrayAccountId"]["S"]) == (f"CLEANUP#STALE#{account}", account)


def test_second_signup_stale_ttl_is_now_plus_stale_entitlement_ttl_days(
    dynamodb: Any, table: TableDescription
) -> None:
    simulate(
        dynamodb,
        table,
        users=1,
        operations=2,
        mix=only(signup=1, second_signup=1),
        stale_entitlement_ttl_days=1,
    )
    (record,) = records(dynamodb, table, "CLEANUP#")
    assert record["ttl"] == {"N": str(NOW_EPOCH + DAY)}


def test_second_signup_is_one_transaction(dynamodb: Any, table: TableDescription) -> None:
    spy = Spy(dynamodb)
    simulate(spy, table, users=1, operations=2, mix=only(signup=1, second_signup=1))
    name, request = spy.calls[-1]
    assert (name, [next(iter(op)) for op in request["TransactItems"]]) == (
        "transact_write_items",
        ["Put", "Update", "Put"],
    )


# ---- relink and SaveIfActive ---------------------------------------------------------------------


def test_relink_puts_back_exactly_the_image_it_read_so_the_stream_holds_no_record_of_it(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    """A put that changes nothing writes no stream record, in AWS and on the local stack."""
    summary = simulate(
        dynamodb, table, users=1, operations=2, mix=only(signup=1, relink=1), max_relink_window=0
    )
    events = [record["eventName"] for record in read_stream(streams, table.stream_arn)]
    assert (summary.relinks_saved, events) == (1, ["INSERT"])


def test_relink_writes_through_save_if_active(dynamodb: Any, table: TableDescription) -> None:
    spy = Spy(dynamodb)
    simulate(spy, table, users=1, operations=2, mix=only(signup=1, relink=1), max_relink_window=0)
    name, request = spy.calls[-1]
    assert (name, request["ConditionExpression"], request["ExpressionAttributeValues"]) == (
        "put_item",
        "attribute_exists(pk) AND #status = :active",
        {":active": {"S": "Active"}},
    )


def test_a_relink_whose_row_was_superseded_in_its_window_is_rejected_and_counted(
    dynamodb: Any, table: TableDescription
) -> None:
    summary = simulate(
        dynamodb,
        table,
        users=1,
        operations=12,
        mix=only(signup=1, relink=1, second_signup=1),
        max_relink_window=10,
        contention=1.0,
        seed=0,
    )
    assert summary.guard_rejections >= 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_guarded_relinks_never_leave_a_user_two_active_rows(
    dynamodb: Any, table: TableDescription, seed: int
) -> None:
    simulate(dynamodb, table, users=5, operations=80, seed=seed, contention=1.0, max_relink_window=4)
    active = [r["pk"]["S"] for r in rows(dynamodb, table) if r["status"]["S"] == "Active"]
    assert len(active) == len(set(active))


def test_save_if_active_writes_back_an_active_row(dynamodb: Any, table: TableDescription) -> None:
    image = active_row("u1", "a1")
    dynamodb.put_item(TableName=table.table_name, Item=image)
    DirectWrites(dynamodb, table.table_name).save_if_active(image)
    assert get_item(dynamodb, table.table_name, "USER#u1", "ENTITLEMENT#a1") == image


@pytest.mark.parametrize("status", ["Superseded", "Removed", "Cancelled"])
def test_save_if_active_refuses_a_row_that_is_no_longer_active(
    dynamodb: Any, table: TableDescription, status: str
) -> None:
    image = active_row("u1", "a1")
    set_status(dynamodb, table, image, status)
    with pytest.raises(NotActiveRefused):
        DirectWrites(dynamodb, table.table_name).save_if_active(image)


def test_save_if_active_refuses_a_missing_row(dynamodb: Any, table: TableDescription) -> None:
    with pytest.raises(NotActiveRefused):
        DirectWrites(dynamodb, table.table_name).save_if_active(active_row("u1", "a1"))


def test_a_refused_save_leaves_the_row_as_it_was(dynamodb: Any, table: TableDescription) -> None:
    image = active_row("u1", "a1")
    set_status(dynamodb, table, image, "Superseded")
    with pytest.raises(NotActiveRefused):
        DirectWrites(dynamodb, table.table_name).save_if_active(image)
    row = get_item(dynamodb, table.table_name, "USER#u1", "ENTITLEMENT#a1")
    assert row is not None and row["status"] == {"S": "Superseded"}


def test_a_refused_save_is_never_retried(dynamodb: Any, table: TableDescription) -> None:
    spy = Spy(dynamodb)
    with pytest.raises(NotActiveRefused):
        DirectWrites(spy, table.table_name).save_if_active(active_row("u1", "a1"))
    assert [name for name, _ in spy.calls] == ["put_item"]


def test_a_refused_direct_put_back_is_terminal() -> None:
    assert issubclass(NotActiveRefused, TerminalError)


# ---- planted faults ------------------------------------------------------------------------------


@pytest.fixture
def faults(dynamodb: Any, table: TableDescription) -> SimulationSummary:
    return simulate(dynamodb, table, users=3, operations=0, faults=True)


def test_each_fault_kind_is_planted_once_by_default(faults: SimulationSummary) -> None:
    assert faults.faults == {kind.value: 1 for kind in FaultKind}


def test_every_planted_fault_is_listed_with_its_own_id(faults: SimulationSummary) -> None:
    ids = [f.fault_id for f in faults.planted_faults]
    assert (len(ids), len(set(ids))) == (len(FaultKind), len(FaultKind))


def test_fault_count_plants_each_kind_that_many_times(dynamodb: Any, table: TableDescription) -> None:
    summary = simulate(dynamodb, table, users=3, operations=10, faults=True, faults_per_kind=3)
    assert summary.faults == {kind.value: 3 for kind in FaultKind}


def test_without_faults_nothing_is_planted(dynamodb: Any, table: TableDescription) -> None:
    summary = simulate(dynamodb, table, users=3, operations=10)
    assert (sum(summary.faults.values()), summary.planted_faults) == (0, [])


def test_the_planted_race_leaves_the_user_two_active_rows(
    dynamodb: Any, table: TableDescription, faults: SimulationSummary
) -> None:
    race = planted(faults, FaultKind.STALE_PUT_RACE)
    statuses = [
        item_of(dynamodb, table, race, role)["status"]["S"] for role in ("resurrected_row", "new_row")
    ]
    assert statuses == ["Active", "Active"]


def test_the_planted_race_leaves_a_stale_record_naming_the_account_in_use(
    dynamodb: Any, table: TableDescription, faults: SimulationSummary
) -> None:
    race = planted(faults, FaultKind.STALE_PUT_RACE)
    record = item_of(dynamodb, table, race, "stale_record_naming_account_in_use")
    in_use = item_of(dynamodb, table, race, "resurrected_row")
    assert (record["arrayAccountId"], in_use["status"]["S"]) == (in_use["arrayAccountId"], "Active")


def test_the_planted_race_is_an_unconditional_put_of_the_stale_image(
    dynamodb: Any, streams: Any, table: TableDescription, faults: SimulationSummary
) -> None:
    race = planted(faults, FaultKind.STALE_PUT_RACE)
    (row_key,) = [i for i in race.items if i.role == "resurrected_row"]
    changes = [
        (r["dynamodb"]["OldImage"]["status"]["S"], r["dynamodb"]["NewImage"]["status"]["S"])
        for r in read_stream(streams, table.stream_arn)
        if r["eventName"] == "MODIFY" and r["dynamodb"]["Keys"]["sk"]["S"] == row_key.sk
    ]
    assert changes == [("Active", "Superseded"), ("Superseded", "Active")]


def test_the_planted_failed_reactivation_leaves_the_row_active_and_its_cancellation_record(
    dynamodb: Any, table: TableDescription, faults: SimulationSummary
) -> None:
    fault = planted(faults, FaultKind.FAILED_REACTIVATION_DELETE)
    row = item_of(dynamodb, table, fault, "row")
    record = item_of(dynamodb, table, fault, "cancellation_record_left_behind")
    assert (row["status"]["S"], record["arrayAccountId"]) == ("Active", row["arrayAccountId"])


def test_the_planted_string_ttl_is_a_string_of_epoch_seconds(
    dynamodb: Any, table: TableDescription, faults: SimulationSummary
) -> None:
    record = item_of(dynamodb, table, planted(faults, FaultKind.STRING_TTL), "cancellation_record_string_ttl")
    assert record["ttl"] == {"S": str(NOW_EPOCH + 63 * DAY)}


def test_the_planted_millisecond_ttl_is_in_epoch_milliseconds(
    dynamodb: Any, table: TableDescription, faults: SimulationSummary
) -> None:
    record = item_of(
        dynamodb, table, planted(faults, FaultKind.MILLISECOND_TTL), "stale_record_millisecond_ttl"
    )
    assert record["ttl"] == {"N": str((NOW_EPOCH + DAY) * 1000)}


def test_the_planted_canary_token_is_on_the_row(
    dynamodb: Any, table: TableDescription, faults: SimulationSummary
) -> None:
    canary = planted(faults, FaultKind.TOKEN_CANARY)
    row = item_of(dynamodb, table, canary, "row")
    assert canary.processor_token is not None
    assert (row["processorToken"]["S"], canary.processor_token.startswith(CANARY_TOKEN_PREFIX)) == (
        canary.processor_token,
        True,
    )


def test_the_canary_token_reaches_the_stream_in_the_signups_new_image(
    streams: Any, table: TableDescription, faults: SimulationSummary
) -> None:
    token = planted(faults, FaultKind.TOKEN_CANARY).processor_token
    images = [
        image
        for r in read_stream(streams, table.stream_arn)
        for image in (r["dynamodb"].get("NewImage"), r["dynamodb"].get("OldImage"))
        if image and image.get("processorToken", {}).get("S") == token
    ]
    # The relink puts back the image it read: no stream record (stream fidelity), so only the signup's.
    assert len(images) == 1


def test_only_canary_faults_carry_canary_tokens(dynamodb: Any, table: TableDescription) -> None:
    summary = simulate(dynamodb, table, users=10, operations=60, faults=True, faults_per_kind=2)
    canaries = {
        r["processorToken"]["S"]
        for r in rows(dynamodb, table)
        if r["processorToken"]["S"].startswith(CANARY_TOKEN_PREFIX)
    }
    assert canaries == {f.processor_token for f in summary.planted_faults if f.kind is FaultKind.TOKEN_CANARY}


def test_planted_malformed_ttls_outlive_the_ttl_emulator(
    dynamodb: Any, table: TableDescription, faults: SimulationSummary
) -> None:
    TtlEmulator(FixedClock(NOW + timedelta(days=100)), table_names=[table.table_name]).run_once()
    survivors = {
        role: get_item(dynamodb, table.table_name, key.pk, key.sk) is not None
        for fault in faults.planted_faults
        for key in fault.items
        for role in [key.role]
        if role.startswith(("cancellation_record", "stale_record"))
    }
    assert survivors == {
        "cancellation_record_string_ttl": True,
        "stale_record_millisecond_ttl": True,
        "cancellation_record_left_behind": False,
        "stale_record_naming_account_in_use": False,
    }


def test_planting_faults_leaves_the_mix_unchanged(dynamodb: Any) -> None:
    plain, with_faults = (create_table(dynamodb, unique_table_name("mix")) for _ in range(2))
    without = simulate(dynamodb, plain, users=8, operations=40, seed=5)
    planted_run = simulate(dynamodb, with_faults, users=8, operations=40, seed=5, faults=True)
    assert planted_run.operations == without.operations


# ---- determinism, pacing, privacy ----------------------------------------------------------------


def test_a_seed_reproduces_the_same_writes(dynamodb: Any) -> None:
    first, second = (create_table(dynamodb, unique_table_name("seed")) for _ in range(2))
    simulate(dynamodb, first, users=6, operations=40, seed=11, faults=True)
    simulate(dynamodb, second, users=6, operations=40, seed=11, faults=True)

    def content(description: TableDescription) -> list[str]:
        return sorted(json.dumps(i, sort_keys=True) for i in items_of(dynamodb, description.table_name))

    assert content(first) == content(second)


def test_different_seeds_make_different_users(dynamodb: Any) -> None:
    first, second = (create_table(dynamodb, unique_table_name("seed")) for _ in range(2))
    simulate(dynamodb, first, users=2, operations=2, seed=1, mix=only(signup=1))
    simulate(dynamodb, second, users=2, operations=2, seed=2, mix=only(signup=1))
    assert {r["pk"]["S"] for r in rows(dynamodb, first)}.isdisjoint(
        r["pk"]["S"] for r in rows(dynamodb, second)
    )


def test_every_requested_operation_is_counted(dynamodb: Any, table: TableDescription) -> None:
    summary = simulate(dynamodb, table, users=10, operations=50, seed=3)
    assert sum(summary.operations.values()) + summary.idle == 50


def test_a_rate_paces_operations_through_the_sleep_it_is_given(
    dynamodb: Any, table: TableDescription
) -> None:
    slept: list[float] = []
    settings = SimulationConfig(
        table_name=table.table_name, users=5, operations=5, rate=10.0, mix=only(signup=1)
    )
    run_simulation(
        settings,
        DirectWrites(dynamodb, table.table_name),
        FixedClock(NOW),
        sleep=slept.append,
        monotonic=lambda: 0.0,
    )
    assert slept == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_without_a_rate_nothing_sleeps(dynamodb: Any, table: TableDescription) -> None:
    slept: list[float] = []
    settings = SimulationConfig(table_name=table.table_name, users=5, operations=5, mix=only(signup=1))
    run_simulation(settings, DirectWrites(dynamodb, table.table_name), FixedClock(NOW), sleep=slept.append)
    assert slept == []


def user_ids(dynamodb: Any, table: TableDescription) -> set[str]:
    return {i["userId"]["S"] for i in items_of(dynamodb, table.table_name)}


def test_the_summary_without_keys_holds_no_user_ids(dynamodb: Any, table: TableDescription) -> None:
    summary = simulate(dynamodb, table, users=5, operations=30, faults=True)
    text = json.dumps(summary.to_json(include_keys=False))
    assert [u for u in user_ids(dynamodb, table) if u in text] == []


def test_the_full_summary_names_every_planted_item(dynamodb: Any, table: TableDescription) -> None:
    summary = simulate(dynamodb, table, users=3, operations=0, faults=True)
    listed = summary.to_json(include_keys=True)["planted_faults"]
    assert all(
        get_item(dynamodb, table.table_name, i["pk"], i["sk"]) is not None
        for fault in listed
        for i in fault["items"]
    )


def test_the_logs_hold_no_user_ids(
    dynamodb: Any, table: TableDescription, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        simulate(dynamodb, table, users=5, operations=30, faults=True)
    logged = " ".join(
        f"{r.getMessage()} {r.__dict__}" for r in caplog.records if r.name.startswith("devstack")
    )
    assert [u for u in user_ids(dynamodb, table) if u in logged] == []


@pytest.mark.parametrize(
    "bad",
    [
        {"users": 0},
        {"rate": -1.0},
        {"contention": 1.5},
        {"operations": -1},
        {"cleanup_ttl_days": 0},
    ],
)
def test_an_impossible_configuration_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SimulationConfig(table_name="entitlements", **bad)


def test_an_all_zero_mix_is_refused() -> None:
    with pytest.raises(ValueError):
        only()


def test_every_item_written_parses_as_its_contract_type(dynamodb: Any, table: TableDescription) -> None:
    simulate(dynamodb, table, users=10, operations=60, seed=4, faults=True)
    deserializer = TypeDeserializer()
    parsed = [
        parse_item({k: deserializer.deserialize(v) for k, v in item.items()})
        for item in items_of(dynamodb, table.table_name)
    ]
    assert {type(p).__name__ for p in parsed} == {"EntitlementRow", "CleanupRecord"}


class Throttled:
    """A client whose puts are throttled `times` times before they reach the real one."""

    def __init__(self, inner: Any, times: int) -> None:
        self.inner, self.left, self.calls = inner, times, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put_item(self, **kwargs: Any) -> Any:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise ClientError({"Error": {"Code": "ThrottlingException"}}, "PutItem")
        return self.inner.put_item(**kwargs)


def test_a_throttled_write_is_retried_until_it_passes(dynamodb: Any, table: TableDescription) -> None:
    throttled = Throttled(dynamodb, times=2)
    DirectWrites(throttled, table.table_name, sleep=lambda _: None).put(active_row("u1", "a1"))
    assert (
        throttled.calls,
        get_item(dynamodb, table.table_name, "USER#u1", "ENTITLEMENT#a1") is not None,
    ) == (
        3,
        True,
    )


def test_a_write_that_stays_throttled_is_a_retryable_error(dynamodb: Any, table: TableDescription) -> None:
    throttled = Throttled(dynamodb, times=10)
    with pytest.raises(RetryableError, match="ThrottlingException"):
        DirectWrites(throttled, table.table_name, attempts=3, sleep=lambda _: None).put(
            active_row("u1", "a1")
        )


def test_a_fault_planted_unwritten_is_described_as_if_written_and_sends_no_write(
    dynamodb: Any, table: TableDescription
) -> None:
    kinds = (FaultKind.STRING_TTL, FaultKind.TOKEN_CANARY)
    config = SimulationConfig(table_name=table.table_name, seed=5)
    spy = Spy(dynamodb)
    written = plant_faults(config, DirectWrites(dynamodb, table.table_name), FixedClock(NOW), kinds)
    unwritten = plant_faults(
        config,
        DirectWrites(spy, table.table_name),
        FixedClock(NOW),
        kinds,
        unwritten=(FaultKind.STRING_TTL,),
    )
    assert unwritten == written
    assert [name for name, _ in spy.calls] == ["put_item", "get_item", "put_item"]  # the canary's only


def test_planted_faults_users_carry_the_namespace(dynamodb: Any, table: TableDescription) -> None:
    config = SimulationConfig(table_name=table.table_name, seed=5)
    faults = plant_faults(
        config,
        DirectWrites(dynamodb, table.table_name),
        FixedClock(NOW),
        (FaultKind.STRING_TTL,),
        namespace="r2-",
    )
    assert [(f.user_id[:3], f.items[0].pk) for f in faults] == [("r2-", f"USER#{faults[0].user_id}")]


def test_progress_is_reported_before_each_operation_and_at_the_end(
    dynamodb: Any, table: TableDescription
) -> None:
    seen: list[tuple[int, int]] = []
    settings = SimulationConfig(table_name=table.table_name, users=2, operations=3, mix=only(signup=1))
    run_simulation(
        settings,
        DirectWrites(dynamodb, table.table_name),
        FixedClock(NOW),
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)]


# ---- through the service (EntitlementOperations) ---------------------------------------------------


class RecordingService:
    """An `EntitlementOperations` that answers every call DONE (or `answer`) and records it."""

    def __init__(self, answer: OperationAnswer = OperationAnswer.DONE) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str]] = []
        self.accounts = 0

    def _answered(self, name: str, user_id: str) -> Answered:
        self.calls.append((name, user_id))
        self.accounts += 1
        return Answered(self.answer, f"acct-{self.accounts}")

    def signup(self, user_id: str) -> Answered:
        return self._answered("signup", user_id)

    def cancel(self, user_id: str) -> Answered:
        return self._answered("cancel", user_id)

    def reactivate(self, user_id: str) -> Answered:
        return self._answered("reactivate", user_id)

    def second_signup(self, user_id: str) -> Answered:
        return self._answered("second_signup", user_id)

    def relink(self, user_id: str) -> Answered:
        return self._answered("relink", user_id)


def test_through_the_service_every_operation_is_a_call_of_the_service_and_none_a_table_write(
    dynamodb: Any, table: TableDescription
) -> None:
    service = RecordingService()
    config = SimulationConfig(table_name=table.table_name, users=5, operations=40, seed=4)
    summary = run_simulation(
        config, DirectWrites(dynamodb, table.table_name), FixedClock(NOW), service=service
    )
    counted = {op: n for op, n in summary.operations.items() if n}
    called: dict[str, int] = {}
    for name, _ in service.calls:
        called[name] = called.get(name, 0) + 1
    assert (summary.mode, called, summary.writes, items_of(dynamodb, table.table_name)) == (
        "service",
        counted,
        0,
        [],
    )


def test_through_the_service_a_refused_user_is_left_alone() -> None:
    service = RecordingService(OperationAnswer.CONCURRENT)
    config = SimulationConfig(table_name="unused", users=3, operations=20, seed=5)
    summary = run_simulation(config, DirectWrites(None, "unused"), FixedClock(NOW), service=service)  # type: ignore[arg-type]
    assert (sorted({name for name, _ in service.calls}), summary.refused, summary.idle) == (
        ["signup"],
        {"signup": 3},
        17,
    )


def test_through_the_service_planted_faults_are_still_direct_writes(
    dynamodb: Any, table: TableDescription
) -> None:
    config = SimulationConfig(table_name=table.table_name, users=2, operations=5, seed=6, faults=True)
    summary = run_simulation(
        config, DirectWrites(dynamodb, table.table_name), FixedClock(NOW), service=RecordingService()
    )
    planted_users = {f.user_id for f in summary.planted_faults}
    assert {i["userId"]["S"] for i in items_of(dynamodb, table.table_name)} == planted_users

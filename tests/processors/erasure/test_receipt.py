"""An erasure's receipt: after the last pass a verifier scans every store; a clean receipt is kept in the
ledger and lands in the lake (the `erasure.completed` outcome) before the ACK, and a receipt with a trace
stops the ACK, leaves the message for redelivery and is counted in `entitlements_erasure_traces_found`."""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from prometheus_client import REGISTRY

from adapters import HttpArrayClient
from analytics import Lake, LakeHandler, connect
from analytics.lake._traces import BatchTraces
from analytics.lake.eraser import AnalyticsLakeEraser
from devstack.fake_array import FakeArrayServer
from pipeline.quarantine import Quarantine
from processors.erasure import ErasureLedger, ErasureTargets
from processors.erasure._bounded import BoundedCalls, Deadline
from processors.erasure._errors import ErasureStepError
from processors.erasure._procedure import AccountErasure
from schema.clock import SystemClock
from schema.table import user_pk
from tests.processors.erasure.erasure_subscriber_helpers import Stack, entitlement_item, erase
from tests.processors.erasure.test_erasure_end_to_end import Account, _land


class PurgeThatLeavesRows(AnalyticsLakeEraser):
    """A lake whose purge reports success and removes nothing: the trace the verifier must catch."""

    def purge(self, user_ids: Collection[str]) -> Mapping[str, Mapping[str, int]]:
        return {}


def _traces_counted() -> float:
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "entitlements_erasure_traces_found"
        for sample in metric.samples
        if sample.name.endswith("_total")
    )


def _unverified_counted(reason: str) -> float:
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "entitlements_erasure_unverified"
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels.get("reason") == reason
    )


def test_a_clean_receipt_is_in_the_ledger_and_the_lake_before_the_ack(
    dynamodb: Any,
    streams: Any,
    table: Any,
    fake_array: FakeArrayServer,
    lake: Lake,
    make_stack: Any,
    ledger: ErasureLedger,
) -> None:
    account = Account(dynamodb, streams, table, fake_array)
    _land(account, lake)
    stack: Stack = make_stack(
        outcomes=LakeHandler(lake, name="erasure-outcomes"),
        handler_timeout_seconds=20,
        batch_timeout_seconds=10,
    )
    request = erase(account.user)
    stack.publish(request)
    assert stack.answer_to(request.request_id).outcome == "DONE"
    # The worker still runs (nothing closed it): the receipt is already durable in both places.
    [kept] = [json.loads(text) for text in ledger.receipts(account.user)]
    assert kept["ledger_id"] == ledger.ledger_id(account.user)
    assert {scan["store"] for scan in kept["stores"]} >= {"table", "quarantine", "dead_letters", "parked"}
    assert any(scan["store"].startswith("lake/") for scan in kept["stores"])
    assert all(scan["traces"] == 0 for scan in kept["stores"])
    assert kept["started_at"] <= kept["pass_one_at"] <= kept["erased_at"] <= kept["verified_at"]
    first, second = kept["removed"]["1"], kept["removed"]["2"]
    assert (first["table/entitlement_rows"], first["table/cleanup_records"], first["array/accounts"]) == (
        3,
        2,
        3,
    )
    assert first["lake/changes"] > 0 and first["lake/outcomes"] == 1  # the user's own seeded outcome
    assert first["array/confirmed_gone"] == 3
    [array] = [scan for scan in kept["stores"] if scan["store"] == "array"]
    assert (array["traces"], array["checked"]) == (0, 3) and "no listing" in array["note"]
    assert (second["table/entitlement_rows"], second["table/cleanup_records"]) == (0, 0)  # pass one took all
    con = connect(lake)
    try:
        rows = con.execute("SELECT user_id, detail FROM outcomes WHERE kind = 'erasure.completed'").fetchall()
    finally:
        con.close()
    assert [(user, json.loads(detail)) for user, detail in rows] == [(None, kept)]
    assert account.user not in rows[0][1]


def test_a_receipt_with_a_trace_sends_no_ack_and_leaves_the_message_for_redelivery(
    dynamodb: Any,
    streams: Any,
    table: Any,
    fake_array: FakeArrayServer,
    lake: Lake,
    make_stack: Any,
    ledger: ErasureLedger,
) -> None:
    account = Account(dynamodb, streams, table, fake_array)
    _land(account, lake)
    counted = _traces_counted()
    stack: Stack = make_stack(lake=PurgeThatLeavesRows(lake), handler_timeout_seconds=10)
    request = erase(account.user)
    stack.publish(request)
    stack.drive(lambda: bool(ledger.receipts(account.user)))
    assert stack.responses.for_request(request.request_id) == []  # no ACK DONE
    [receipt] = [json.loads(text) for text in ledger.receipts(account.user)]
    held = {scan["store"] for scan in receipt["stores"] if scan["traces"]}
    assert held and all(store.startswith("lake/") for store in held)
    assert _traces_counted() - counted == len(held)
    entry = ledger.entry(account.user)
    assert entry is not None and not entry.completed
    assert stack.queue_depths(stack.channel.queue_url) == 1  # the pass-two copy, left for redelivery


class ScanOutOfTime(AnalyticsLakeEraser):
    """A lake whose scan is given no time: the real scan, with its end already passed."""

    def traces_for(
        self, user_ids: Collection[str], *, until: float | None = None
    ) -> Mapping[str, BatchTraces | None]:
        return super().traces_for(user_ids, until=time.monotonic() - 1)


def test_a_batch_that_cannot_verify_in_its_time_is_left_unverified_and_unanswered(
    dynamodb: Any,
    streams: Any,
    table: Any,
    fake_array: FakeArrayServer,
    lake: Lake,
    make_stack: Any,
    ledger: ErasureLedger,
) -> None:
    account = Account(dynamodb, streams, table, fake_array)
    _land(account, lake)
    counted = _traces_counted()
    timed_out = _unverified_counted("timeout")
    stack: Stack = make_stack(lake=ScanOutOfTime(lake), handler_timeout_seconds=10)
    request = erase(account.user)
    stack.publish(request)
    stack.drive(lambda: stack.worker.stats.unverified >= 1)
    assert stack.responses.for_request(request.request_id) == []  # no ACK DONE
    assert ledger.receipts(account.user) == []  # nothing was verified, so no receipt
    assert _traces_counted() == counted  # not counted as a trace: counted as unverified
    assert _unverified_counted("timeout") == timed_out + stack.worker.stats.unverified
    entry = ledger.entry(account.user)
    assert entry is not None and not entry.completed


class LakeThatCannotBeRead(AnalyticsLakeEraser):
    """A lake whose every table's scan reads nothing (None: the store could not be read)."""

    def traces_for(
        self, user_ids: Collection[str], *, until: float | None = None
    ) -> Mapping[str, BatchTraces | None]:
        return dict.fromkeys(super().traces_for(user_ids, until=until))


def test_an_erasure_whose_store_cannot_be_read_is_counted_unverified_and_unanswered(
    dynamodb: Any,
    streams: Any,
    table: Any,
    fake_array: FakeArrayServer,
    lake: Lake,
    make_stack: Any,
    ledger: ErasureLedger,
) -> None:
    account = Account(dynamodb, streams, table, fake_array)
    _land(account, lake)
    unreadable = _unverified_counted("unreadable")
    stack: Stack = make_stack(lake=LakeThatCannotBeRead(lake), handler_timeout_seconds=10)
    request = erase(account.user)
    stack.publish(request)
    stack.drive(lambda: stack.worker.stats.unverified >= 1)
    assert stack.responses.for_request(request.request_id) == []  # no ACK DONE
    assert _unverified_counted("unreadable") == unreadable + stack.worker.stats.unverified
    entry = ledger.entry(account.user)
    assert entry is not None and not entry.completed


def test_each_erasure_of_one_pass_counts_what_was_removed_of_its_own_user(
    dynamodb: Any,
    streams: Any,
    table: Any,
    fake_array: FakeArrayServer,
    lake: Lake,
    targets: ErasureTargets,
    state_dir: Path,
) -> None:
    first = Account(dynamodb, streams, table, fake_array)
    second = Account(dynamodb, streams, table, fake_array)
    extra = f"arr-extra-{second.user}"
    dynamodb.put_item(TableName=table.table_name, Item=entitlement_item(second.user, extra, "Superseded"))
    fake_array.add_users([extra])
    _land(second, lake)  # both accounts' stream so far
    quarantine = Quarantine(state_dir / "quarantine")
    for number, user in enumerate((first.user, second.user, second.user), start=1):
        quarantine.put(
            raw=f'{{"pk": {{"S": "USER#{user}"}}, "broken'.encode(),
            reason="test",
            stream_arn=table.stream_arn,
            shard_id="shardId-1",
            sequence_number=str(number),
        )
    changes = {user: _changes_of(lake, user) for user in (first.user, second.user)}
    with BoundedCalls() as calls:
        erasure = AccountErasure(targets, calls, batch_timeout=10, clock=SystemClock())
        results, removed = erasure.erase_counted([first.user, second.user], Deadline(60))
    assert results == {first.user: None, second.user: None}
    mine, theirs = removed[first.user], removed[second.user]
    assert (mine["table/entitlement_rows"], theirs["table/entitlement_rows"]) == (3, 4)
    assert (mine["array/accounts"], theirs["array/accounts"]) == (3, 4)
    assert (mine["lake/changes"], theirs["lake/changes"]) == (changes[first.user], changes[second.user])
    assert (mine["quarantine/records"], theirs["quarantine/records"]) == (1, 2)


def _changes_of(lake: Lake, user: str) -> int:
    """The user's rows in the change log, read with deltalake's own reader."""
    changes = DeltaTable(lake.path("changes"))
    rows = changes.to_pyarrow_table(columns=["user_id", "pk"]).to_pylist()
    return sum(1 for row in rows if row["user_id"] == user or row["pk"] == user_pk(user))


class ArrayThatKeepsAccounts:
    """Array answering a delete yet still holding the account (asked again, it deletes it again)."""

    def __init__(self, array: HttpArrayClient, fake: FakeArrayServer) -> None:
        self._array, self._fake = array, fake

    def delete_user(self, array_user_id: str, *, deadline: float | None = None) -> None:
        self._array.delete_user(array_user_id, deadline=deadline)
        self._fake.add_users([array_user_id])


def test_an_array_account_that_is_not_gone_after_its_delete_fails_the_pass(
    dynamodb: Any,
    streams: Any,
    table: Any,
    fake_array: FakeArrayServer,
    array_client: HttpArrayClient,
    targets: ErasureTargets,
) -> None:
    account = Account(dynamodb, streams, table, fake_array)
    keeps = replace(targets, array=ArrayThatKeepsAccounts(array_client, fake_array))
    with BoundedCalls() as calls:
        erasure = AccountErasure(keeps, calls, batch_timeout=10, clock=SystemClock())
        results = erasure.erase([account.user], Deadline(60))
    error = results[account.user]
    assert isinstance(error, ErasureStepError) and (error.step, error.code) == ("array-confirm", "NOT_GONE")
    assert account.table_items(account.user)  # the rows naming the accounts are kept for the next pass

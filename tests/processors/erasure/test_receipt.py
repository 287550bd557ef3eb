"""An erasure's receipt: after the last pass a verifier scans every store; a clean receipt is kept in the
ledger and lands in the lake (the `erasure.completed` outcome) before the ACK, and a receipt with a trace
stops the ACK, leaves the message for redelivery and is counted in `entitlements_erasure_traces_found`."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from prometheus_client import REGISTRY

from analytics import Lake, LakeHandler, connect
from analytics.erasure import AnalyticsLakeEraser
from devstack.fake_array import FakeArrayServer
from processors.erasure import ErasureLedger
from tests.processors.erasure.erasure_subscriber_helpers import Stack, erase
from tests.processors.erasure.test_erasure_end_to_end import Account, _land


class PurgeThatLeavesRows(AnalyticsLakeEraser):
    """A lake whose purge reports success and removes nothing: the trace the verifier must catch."""

    def purge(self, user_ids: Collection[str]) -> int:
        return 0


def _traces_counted() -> float:
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "entitlements_erasure_traces_found"
        for sample in metric.samples
        if sample.name.endswith("_total")
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
    stack: Stack = make_stack(outcomes=LakeHandler(lake, name="erasure-outcomes"))
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
    assert first["lake/rows_in_batch"] > 0 and first["batch_accounts"] == 1
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

"""ERASE by ACCOUNT end to end on moto: an account with Active and retired rows, cleanup records, Array
accounts, lake rows (change log, outcomes, snapshots), quarantined records and parked work is answered
ACK DONE after two passes, after which CHECK answers HOLDS_NONE and no lake query returns it."""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from analytics import Lake, LakeHandler, connect, snapshot
from analytics.lake.eraser import AnalyticsLakeEraser
from devstack.fake_array import FakeArrayServer
from pipeline.decode import decode_stream_record
from pipeline.filtering import DroppingUsers
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from processors.erasure import ErasureLedger, erased_filter
from schema.erasure import AckResponse, HoldingsResponse
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id
from schema.table import user_pk
from tests.processors.erasure.erasure_subscriber_helpers import (
    Stack,
    adapter_bytes,
    check,
    cleanup_item,
    entitlement_item,
    erase,
)
from tests.support.dynamodb import read_stream


class Account:
    """One user's data in every place the store keeps it, and one bystander's."""

    def __init__(self, dynamodb: Any, streams: Any, table: Any, fake_array: FakeArrayServer) -> None:
        tag = uuid.uuid4().hex[:8]
        self.user = f"user-{tag}"
        self.bystander = f"bystander-{tag}"
        self.active, self.superseded, self.cancelled = (f"arr-{tag}-{n}" for n in ("a", "s", "c"))
        self.bystander_account = f"arr-{tag}-b"
        self.dynamodb, self.streams, self.table = dynamodb, streams, table
        items = [
            entitlement_item(self.user, self.active, "Active"),
            entitlement_item(self.user, self.superseded, "Superseded"),
            entitlement_item(self.user, self.cancelled, "Cancelled"),
            cleanup_item(self.user, self.superseded, cancellation=False),
            cleanup_item(self.user, self.cancelled, cancellation=True),
            entitlement_item(self.bystander, self.bystander_account, "Active"),
        ]
        for item in items:
            dynamodb.put_item(TableName=table.table_name, Item=item)
        # The cancelled account is already gone at Array: its delete answers 404, which is done.
        fake_array.add_users([self.active, self.superseded, self.bystander_account])

    def stream_records(self) -> list[dict[str, Any]]:
        return read_stream(self.streams, self.table.stream_arn)

    def table_items(self, user_id: str) -> list[dict[str, Any]]:
        return self.dynamodb.query(
            TableName=self.table.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": user_pk(user_id)}},
            ConsistentRead=True,
        )["Items"]


SHARD = "shardId-00000001700000000000-erasure"


def _land(account: Account, lake: Lake) -> None:
    """Land the stream so far in the lake, with an outcome for each user, and take a snapshot."""
    handler = LakeHandler(lake)
    for record in account.stream_records():
        handler.add(decode_stream_record(record, stream_arn=account.table.stream_arn, shard_id=SHARD))
    for user_id, array_account in ((account.user, account.cancelled), (account.bystander, "arr-x")):
        handler.add_outcome(
            OutcomeEvent(
                outcome_id=outcome_id(f"seed-{user_id}", OutcomeKind.CLEANUP_DELETED),
                kind=OutcomeKind.CLEANUP_DELETED,
                occurred_at=account.stream_records()[0]["dynamodb"]["ApproximateCreationDateTime"],
                user_id=user_id,
                array_account_id=array_account,
            )
        )
    handler.flush()
    snapshot(lake)


def _keep_consumer_copies(account: Account, state_dir: Path) -> None:
    """A quarantined record of each user (one that never decoded) and a parked batch mixing both."""
    quarantine = Quarantine(state_dir / "quarantine")
    for number, user_id in enumerate((account.user, account.bystander), start=1):
        quarantine.put(
            raw=f'{{"eventID": "x", "dynamodb": {{"Keys": {{"pk": {{"S": "USER#{user_id}"}}}}}}}}'.encode(),
            reason="test",
            stream_arn=account.table.stream_arn,
            shard_id=SHARD,
            sequence_number=str(number),
        )
    records = [
        RawRecord(adapter_bytes(record), record["dynamodb"]["SequenceNumber"])
        for record in account.stream_records()
    ]
    ParkedWork(state_dir / "parked").park(
        handler="lake", stream_arn=account.table.stream_arn, shard_id=SHARD, records=records, reason="test"
    )


def _lake_rows(lake: Lake, user_id: str) -> int:
    con = connect(lake)
    try:
        total = 0
        for view in ("raw_changes", "raw_outcomes", "snapshot_items", "users", "entitlements"):
            total += con.execute(f"SELECT count(*) FROM {view} WHERE user_id = ?", [user_id]).fetchone()[0]
        total += con.execute("SELECT count(*) FROM raw_changes WHERE pk = ?", [user_pk(user_id)]).fetchone()[
            0
        ]
        return int(total)
    finally:
        con.close()


def _files_naming(lake: Lake, user_id: str) -> list[str]:
    """Every Parquet file (masks and views aside) with a user_id or pk of the user."""
    found = []
    for path in Path(lake.base).rglob("*.parquet"):
        table = pq.read_table(path)
        for column in ("user_id", "pk", "item_user_id", "new_item_user_id", "old_item_user_id"):
            if column in table.column_names and any(
                value in (user_id, user_pk(user_id)) for value in table[column].to_pylist()
            ):
                found.append(str(path))
    return found


@pytest.fixture
def account(dynamodb: Any, streams: Any, table: Any, fake_array: FakeArrayServer) -> Account:
    return Account(dynamodb, streams, table, fake_array)


@pytest.fixture
def erased(
    account: Account, lake: Lake, state_dir: Path, make_stack: Any
) -> tuple[Account, Stack, AckResponse, HoldingsResponse]:
    _land(account, lake)
    _keep_consumer_copies(account, state_dir)
    stack: Stack = make_stack(outcomes=LakeHandler(lake, name="erasure-outcomes"))
    before = check(account.user)
    stack.publish(before)
    holdings = stack.answer_to(before.request_id)
    request = erase(account.user, send_no=3)
    stack.publish(request)
    return account, stack, stack.answer_to(request.request_id), holdings


def test_the_account_held_data_everywhere_before_the_erasure(
    account: Account, lake: Lake, lake_eraser: AnalyticsLakeEraser, stores: Any, state_dir: Path
) -> None:
    _land(account, lake)
    _keep_consumer_copies(account, state_dir)
    assert account.table_items(account.user)
    assert _lake_rows(lake, account.user) and _files_naming(lake, account.user)
    assert lake_eraser.holds(account.user) is True
    assert stores.holds(account.user) is True


def test_erase_by_account_is_answered_ack_done_echoing_send_no(erased: Any) -> None:
    _, stack, ack, holdings_before = erased
    assert isinstance(holdings_before, HoldingsResponse) and holdings_before.answer == "HOLDS_DATA"
    assert isinstance(ack, AckResponse)
    assert (ack.outcome, ack.send_no, ack.subscriber) == ("DONE", 3, "entitlements")
    assert (stack.worker.stats.pass_one, stack.worker.stats.done) == (1, 1)


def test_after_the_erasure_check_answers_holds_none(erased: Any) -> None:
    account, stack, _, _ = erased
    after = check(account.user)
    stack.publish(after)
    answer = stack.answer_to(after.request_id)
    assert isinstance(answer, HoldingsResponse)
    assert (answer.answer, answer.key_kind, answer.key) == ("HOLDS_NONE", "ACCOUNT", account.user)


def test_every_row_and_cleanup_record_of_the_account_is_deleted_and_the_bystander_kept(erased: Any) -> None:
    account, _, _, _ = erased
    assert account.table_items(account.user) == []
    assert len(account.table_items(account.bystander)) == 1


def test_every_array_account_the_rows_named_is_deleted_and_only_those(
    erased: Any, fake_array: FakeArrayServer
) -> None:
    account, _, _, _ = erased
    assert not fake_array.has_user(account.active) and not fake_array.has_user(account.superseded)
    assert fake_array.has_user(account.bystander_account)
    assert {call.status for call in fake_array.calls_for(account.cancelled)} == {404}


def test_no_lake_query_or_file_returns_the_account_after_the_erasure(erased: Any, lake: Lake) -> None:
    account, _, _, _ = erased
    assert _lake_rows(lake, account.user) == 0
    assert _files_naming(lake, account.user) == []
    assert _lake_rows(lake, account.bystander) > 0


def test_the_consumers_quarantine_and_parked_work_lose_the_accounts_records_only(
    erased: Any, state_dir: Path
) -> None:
    account, _, _, _ = erased
    quarantined = list(Quarantine(state_dir / "quarantine"))
    assert len(quarantined) == 1 and account.bystander.encode() in quarantined[0].raw
    parked = [record for batch in ParkedWork(state_dir / "parked") for record in batch.records]
    assert parked and all(account.user.encode() not in record.data for record in parked)
    assert any(account.bystander.encode() in record.data for record in parked)


def test_the_ledger_remembers_the_erasure_without_personal_data(
    erased: Any, ledger: ErasureLedger, lake_eraser: AnalyticsLakeEraser
) -> None:
    account, _, _, _ = erased
    assert ledger.is_erased(account.user) and not ledger.is_erased(account.bystander)
    entry = ledger.entry(account.user)
    assert entry is not None and entry.completed and entry.passes == 2
    files = [path for path in ledger.root.rglob("*") if path.is_file()]  # the entries and the receipts
    assert len(files) == 2
    for path in files:
        assert account.user not in path.name and account.user.encode() not in path.read_bytes()
    assert lake_eraser.masked_users() == frozenset()  # unmasked once both passes purged


def test_an_erasure_completed_outcome_lands_with_no_user_id(
    erased: Any, lake: Lake, ledger: ErasureLedger
) -> None:
    account, _, _, _ = erased
    con = connect(lake)  # the worker still runs: the outcome was flushed before the ACK
    rows = con.execute("SELECT user_id, detail FROM outcomes WHERE kind = 'erasure.completed'").fetchall()
    assert [(user, json.loads(detail)["ledger_id"]) for user, detail in rows] == [
        (None, ledger.ledger_id(account.user))
    ]


def test_a_user_who_signs_up_again_after_the_erasure_is_visible_in_the_views(
    account: Account, lake: Lake, make_stack: Any, ledger: ErasureLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # moto's stream clock is this host's: no skew to allow for, so the window ends at the completion.
    monkeypatch.setattr("processors.erasure._ledger.CLOCK_SKEW", timedelta(0))
    _land(account, lake)
    stack: Stack = make_stack()
    request = erase(account.user)
    stack.publish(request)
    assert stack.answer_to(request.request_id).outcome == "DONE"
    time.sleep(1.1)  # the new signup's stream time is after the completion, at any rounding
    again = f"arr-again-{uuid.uuid4().hex[:6]}"
    account.dynamodb.put_item(
        TableName=account.table.table_name, Item=entitlement_item(account.user, again, "Active")
    )
    # The whole stream replayed through the consumer's landing filter: the old data and the erasure's
    # own REMOVEs are dropped, the new signup lands.
    landing = DroppingUsers(LakeHandler(lake, name="replay"), erased_filter(ledger))
    for record in account.stream_records():
        landing.add(decode_stream_record(record, stream_arn=account.table.stream_arn, shard_id=SHARD))
    landing.flush()
    con = connect(lake)
    try:
        rows = con.execute(
            "SELECT array_account_id, status FROM entitlements WHERE user_id = ?", [account.user]
        ).fetchall()
        changes = con.execute(
            "SELECT change_kind, count(*) FROM changes WHERE user_id = ? GROUP BY change_kind", [account.user]
        ).fetchall()
    finally:
        con.close()
    assert rows == [(again, "Active")]
    assert changes == [("INSERT", 1)]  # the new signup's alone
    assert landing.dropped_events > 0

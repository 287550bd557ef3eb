"""Cleanup dead letters through the real daemon and child: a TTL expiry whose record names no Array
account is dead-lettered for the cleanup handler alone, the good expiries beside it are executed and
the shard checkpoints past all of them; re-driven (`entitlements dead-letter redrive`) after a fix of
the handler, it is executed exactly once and leaves the dead letter."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

from config import settings_environment
from devstack import _writes as writes
from devstack.fake_array import FakeArrayServer
from devstack.moto_server import MotoServer
from entitlements.cli import app
from pipeline.dead_letter import DeadLetter, DeadLetters
from pipeline.events import CleanupExpired, StreamEvent
from pipeline.parking import ParkedWork
from processors.cleanup import _handler as cleanup_handler_module
from processors.cleanup._work import CleanupWork, cleanup_work_for
from schema.table import STALE_SK_PREFIX, CleanupRecord, EntitlementStatus, ItemKind
from tests.support.kcl import RunningConsumer, dynamodb, running_consumer, stream_contents, ttl_emulator
from tests.support.lake import query_lake
from tests.support.leases import checkpointed_past, only_shard
from tests.support.polling import wait_for

pytestmark = pytest.mark.kcl

GOOD = 3


@dataclass
class Stack:
    consumer: RunningConsumer
    array: FakeArrayServer
    client: Any
    endpoint: str

    @property
    def table(self) -> str:
        return self.consumer.settings.consumer.table_name

    @property
    def dead_letters(self) -> DeadLetters:
        return DeadLetters(self.consumer.settings.consumer.dead_letter_dir)

    def letters_at(self, sequence_numbers: set[str]) -> list[DeadLetter]:
        return [letter for letter in self.dead_letters if letter.sequence_number in sequence_numbers]

    def parked_at(self, sequence_numbers: set[str]) -> list[str]:
        parked = ParkedWork(self.consumer.settings.consumer.parked_dir)
        return [
            record.sequence_number
            for batch in parked
            for record in batch.records
            if record.sequence_number in sequence_numbers
        ]

    def signup(self, user: str, account: str) -> None:
        row = writes.entitlement_row(
            user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=datetime.now(UTC)
        )
        self.client.put_item(**writes.signup_put(self.table, row))
        self.array.add_users([account])

    def cancel(self, user: str, account: str, ttl: int) -> None:
        self.client.transact_write_items(
            TransactItems=writes.cancellation_transaction(
                self.table, user, account, ttl={"N": str(ttl)}, now=datetime.now(UTC)
            )
        )

    def expiries(self, users: set[str]) -> dict[str, dict[str, Any]]:
        """user -> the TTL removal of that user's cleanup record, read back from the stream."""
        return {
            record["dynamodb"]["Keys"]["pk"]["S"].removeprefix("USER#"): record
            for record in stream_contents(self.endpoint, self.consumer.stream_arn)
            if record["eventName"] == "REMOVE"
            and record.get("userIdentity", {}).get("PrincipalId") == "dynamodb.amazonaws.com"
            and record["dynamodb"]["Keys"]["pk"]["S"].removeprefix("USER#") in users
        }

    def shard_id(self) -> str:
        """The stream's one shard (a new moto stream has one)."""
        return only_shard(self.endpoint, self.consumer.stream_arn)

    def final_outcomes(self, source_event_id: str) -> tuple[list[str], list[str]]:
        """The kinds of the final outcomes of one expiry: (as the `outcomes` view shows them, every row
        the lake holds for it)."""
        finals = (
            "('cleanup.deleted', 'cleanup.already_deleted', 'cleanup.refused_by_guard', 'cleanup.failed')"
        )
        settings = self.consumer.settings
        view = query_lake(
            settings,
            f"SELECT kind FROM outcomes WHERE source_event_id = ? AND kind IN {finals}",
            [source_event_id],
        )
        raw = query_lake(
            settings,
            f"SELECT kind FROM raw_outcomes WHERE source_event_id = ? AND kind IN {finals}",
            [source_event_id],
        )
        return sorted(str(row[0]) for row in view), sorted(str(row[0]) for row in raw)


def ids() -> tuple[str, str]:
    return f"user-{uuid.uuid4().hex[:8]}", f"arr-{uuid.uuid4().hex[:8]}"


def soon() -> int:
    """A TTL that passes within a few seconds (the emulator runs on the real clock)."""
    return int(time.time()) + 4


@pytest.fixture
def stack(moto_server: MotoServer, tmp_path: Path) -> Iterator[Stack]:
    """The real daemon and child on a new table, with their own state (so each test's redrive sees only
    its own dead letters), the fake Array and the TTL emulator on the real clock."""
    with (
        FakeArrayServer() as array,
        running_consumer(
            moto_server.endpoint,
            tmp_path / "state",
            array={"base_url": array.url, "retry_budget_seconds": 5.0, "max_attempts": 2},
        ) as consumer,
        ttl_emulator(moto_server, consumer),
    ):
        yield Stack(consumer, array, dynamodb(moto_server.endpoint), moto_server.endpoint)


def test_an_expiry_naming_no_account_is_dead_lettered_alone_and_the_shard_checkpoints_past_it(
    stack: Stack,
) -> None:
    good = dict(ids() for _ in range(GOOD))
    for user, account in good.items():
        stack.signup(user, account)
    bad_user = f"user-{uuid.uuid4().hex[:8]}"
    ttl = soon()  # one TTL for all four: the emulator expires them in one pass, into one window
    for user, account in good.items():
        stack.cancel(user, account, ttl)
    stack.client.put_item(
        TableName=stack.table,
        Item=writes.cancellation_record(bad_user, "", ttl={"N": str(ttl)}, now=datetime.now(UTC)),
    )

    wait_for(lambda: set(good.values()) <= set(stack.array.deleted_users()), timeout=180)
    expiries = stack.expiries({*good, bad_user})
    assert len(expiries) == GOOD + 1
    bad_sequence = expiries[bad_user]["dynamodb"]["SequenceNumber"]
    wait_for(lambda: len(stack.letters_at({bad_sequence})) == 1, timeout=180)
    sequences = {record["dynamodb"]["SequenceNumber"] for record in expiries.values()}
    last = max(sequences, key=int)
    shard = stack.shard_id()
    wait_for(
        lambda: checkpointed_past(
            stack.endpoint, stack.consumer.settings.consumer.application_name, shard, last
        ),
        timeout=180,
    )

    (letter,) = stack.letters_at(sequences)
    assert (letter.handler, letter.sequence_number, letter.shard_id) == ("cleanup", bad_sequence, shard)
    assert "arrayAccountId" in letter.reason
    assert letter.raw and bad_user.encode() in letter.raw  # the raw record itself, kept for inspection
    assert stack.array.calls_for("") == []
    assert [len(stack.array.calls_for(account)) for account in good.values()] == [1] * GOOD
    assert stack.parked_at(sequences) == []
    for user in good:
        assert stack.final_outcomes(expiries[user]["eventID"])[0] == ["cleanup.deleted"]


def fixed_rule(original: Callable[[StreamEvent], CleanupWork | None]) -> Callable[..., CleanupWork | None]:
    """The handler after its fix: a stale record names its account in its key too
    (`CLEANUP#STALE#<account>`), so a blank `arrayAccountId` on one is read from the key."""

    def cleanup_work_for(event: StreamEvent) -> CleanupWork | None:
        record = event.old_item if isinstance(event, CleanupExpired) else None
        if (
            isinstance(event, CleanupExpired)
            and isinstance(record, CleanupRecord)
            and record.kind is ItemKind.STALE
            and not record.arrayAccountId.strip()
        ):
            named = record.sk.removeprefix(STALE_SK_PREFIX)
            event = msgspec.structs.replace(
                event, old_item=msgspec.structs.replace(record, arrayAccountId=named)
            )
        return original(event)

    return cleanup_work_for


def test_a_dead_letter_redriven_after_the_fix_is_executed_once_and_leaves_the_dead_letter(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, old = ids()
    new = f"arr-{uuid.uuid4().hex[:8]}"
    stack.signup(user, old)
    stack.array.add_users([new])
    now = datetime.now(UTC)
    second_signup = writes.second_signup_transaction(
        stack.table,
        user,
        old_array_account_id=old,
        new_row=writes.entitlement_row(
            user, new, status=EntitlementStatus.ACTIVE, processor_token="tok2", now=now
        ),
        stale_ttl={"N": str(soon())},
        now=now,
    )
    (stale,) = [
        entry["Put"]["Item"] for entry in second_signup if "Put" in entry and "ttl" in entry["Put"]["Item"]
    ]
    stale["arrayAccountId"] = {
        "S": ""
    }  # the fault: the stale record's key names the account, its attribute not
    stack.client.transact_write_items(TransactItems=second_signup)

    wait_for(lambda: user in stack.expiries({user}), timeout=180)
    expiry = stack.expiries({user})[user]
    sequence, event_id = expiry["dynamodb"]["SequenceNumber"], expiry["eventID"]
    wait_for(lambda: len(stack.letters_at({sequence})) == 1, timeout=180)
    assert stack.array.calls_for(old) == []
    assert stack.final_outcomes(event_id) == ([], [])

    monkeypatch.setattr(cleanup_handler_module, "cleanup_work_for", fixed_rule(cleanup_work_for))
    environment = settings_environment(stack.consumer.settings)
    redriven = CliRunner().invoke(app, ["dead-letter", "redrive", "--handler", "cleanup"], env=environment)
    assert redriven.exit_code == 0, redriven.output
    again = CliRunner().invoke(app, ["dead-letter", "redrive", "--handler", "cleanup"], env=environment)
    assert again.exit_code == 0, again.output

    assert stack.letters_at({sequence}) == []
    assert [(call.status, call.deleted) for call in stack.array.calls_for(old)] == [(200, True)]
    assert stack.array.calls_for(new) == []
    assert stack.final_outcomes(event_id) == (["cleanup.deleted"], ["cleanup.deleted"])

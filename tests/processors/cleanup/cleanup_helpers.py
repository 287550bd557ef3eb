"""Helpers shared by the cleanup tests (importable by name: the test folder is on sys.path)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from pipeline.events import ChangeKind, CleanupExpired, StreamPosition
from schema.outcomes import OutcomeEvent, OutcomeKind
from schema.table import CleanupRecord, ItemKind, cancellation_key, stale_key
from tests.support.stream_records import ttl_removal

STREAM_ARN = "arn:aws:dynamodb:eu-west-1:000000000000:table/entitlements/stream/2026-01-01T00:00:00.000"
SHARD_ID = "shardId-00000001700000000000-aaaaaaaa"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class FixedClock:
    def __init__(self, now: datetime = NOW) -> None:
        self.current = now

    def now(self) -> datetime:
        return self.current


class ListSink:
    """An OutcomeSink that keeps what it is given."""

    def __init__(self) -> None:
        self.outcomes: list[OutcomeEvent] = []

    def add_outcome(self, outcome: OutcomeEvent) -> None:
        self.outcomes.append(outcome)

    def kinds(self, account: str | None = None) -> list[OutcomeKind]:
        return [o.kind for o in self.outcomes if account is None or o.array_account_id == account]

    def of_kind(self, kind: OutcomeKind) -> list[OutcomeEvent]:
        return [o for o in self.outcomes if o.kind is kind]


_sequence = iter(range(10**20, 10**21))


def make_expiry(
    user_id: str, account: str, kind: ItemKind = ItemKind.STALE, *, event_id: str | None = None
) -> CleanupExpired:
    """A TTL removal of a cleanup record naming `account`, as pipeline.decode would type it."""
    key = stale_key(user_id, account) if kind is ItemKind.STALE else cancellation_key(user_id)
    record = CleanupRecord(kind=kind, userId=user_id, arrayAccountId=account, ttl=1_770_000_000, **key)
    return CleanupExpired(
        event_id=event_id or uuid.uuid4().hex,
        change=ChangeKind.REMOVE,
        position=StreamPosition(
            stream_arn=STREAM_ARN, shard_id=SHARD_ID, sequence_number=str(next(_sequence))
        ),
        created_at=NOW,
        keys=key,
        item_kind=kind,
        user_id=user_id,
        old_item=record,
    )


def receive_all(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
            "Messages", []
        )
        if not batch:
            return messages
        messages.extend(batch)


def expiry_record(user_id: str, account: str, *, event_id: str, sequence_number: str) -> bytes:
    """The stream record of a TTL removal of a stale-account record naming `account`, as the daemon hands
    it to the child (the adapter's shape: JSON, epoch milliseconds, lowercase `userIdentity`)."""
    key = {name: {"S": value} for name, value in stale_key(user_id, account).items()}
    old = {**key, "userId": {"S": user_id}, "arrayAccountId": {"S": account}, "ttl": {"N": "1772366000"}}
    return ttl_removal(
        old, event_id=event_id, sequence_number=sequence_number, created_at_ms=1772366400000, size_bytes=120
    )

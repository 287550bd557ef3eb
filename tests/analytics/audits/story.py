"""A table history told step by step, as the typed events its stream would carry, landed through the
lake's own landing handler. The service's operations write what docs/table.md describes, each in one
transaction (its records share a stream time); the raw `put`/`delete`/`outcome` steps plant anomalies.

Stream time (`created_at`) and business time (createdAt/updatedAt, ttl) move together on `now`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from analytics.lake import Lake, LakeHandler
from config import LakeSettings
from pipeline.events import StreamEvent, StreamPosition
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id
from schema.table import cancellation_key, entitlement_key, stale_key
from tests.support.table_events import change_event

STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2030-01-01T00:00:00.000"
SHARD = "shardId-00000001-audits"
TOKEN_CANARY = "PTOK-CANARY-AUDIT-"
START = datetime(2030, 6, 1, 9, 0, tzinfo=UTC)
DAY = 86_400


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


@dataclass
class Story:
    now: datetime = START
    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[StreamEvent] = field(default_factory=list)
    outcomes: list[OutcomeEvent] = field(default_factory=list)
    sequence: int = 400_000_000_000_000_000_000
    tokens: int = 0

    # -- time ---------------------------------------------------------------------------------------
    def tick(self, **delta: float) -> datetime:
        self.now = self.now + timedelta(**delta)
        return self.now

    # -- raw steps ----------------------------------------------------------------------------------
    def _emit(
        self, keys: dict[str, str], old: dict[str, Any] | None, new: dict[str, Any] | None, ttl: bool
    ) -> StreamEvent:
        self.sequence += 10
        event = change_event(
            keys,
            old,
            new,
            ttl=ttl,
            event_id=f"ev-{self.sequence}",
            position=StreamPosition(
                stream_arn=STREAM_ARN, shard_id=SHARD, sequence_number=str(self.sequence)
            ),
            created_at=self.now,
        )
        self.events.append(event)
        return event

    def put(self, image: dict[str, Any]) -> StreamEvent:
        """A whole-item put, unconditional."""
        key = (image["pk"], image["sk"])
        old = self.items.get(key)
        self.items[key] = dict(image)
        return self._emit({"pk": key[0], "sk": key[1]}, old, dict(image), ttl=False)

    def delete(self, keys: dict[str, str], *, ttl: bool = False) -> StreamEvent:
        old = self.items.pop((keys["pk"], keys["sk"]))
        return self._emit(dict(keys), old, None, ttl=ttl)

    def outcome(
        self,
        kind: OutcomeKind,
        source: StreamEvent | None,
        *,
        user: str,
        account: str,
        attempt: int = 0,
        detail: str | None = None,
    ) -> OutcomeEvent:
        source_id = source.event_id if source is not None else f"erasure-{user}"
        event = OutcomeEvent(
            outcome_id=outcome_id(source_id, kind, attempt),
            kind=kind,
            occurred_at=self.now,
            user_id=user,
            array_account_id=account,
            source_event_id=source.event_id if source is not None else None,
            source_stream_arn=source.position.stream_arn if source is not None else None,
            source_shard_id=source.position.shard_id if source is not None else None,
            source_sequence_number=source.position.sequence_number if source is not None else None,
            attempt=attempt,
            detail=detail,
        )
        self.outcomes.append(event)
        return event

    def account_created(self, user: str, account: str, by: str = "signup") -> OutcomeEvent:
        """The service's record that Array created `account` (before the write naming it)."""
        kind = OutcomeKind.ARRAY_ACCOUNT_CREATED
        event = OutcomeEvent(
            outcome_id=outcome_id(f"array-account|{user}|{account}", kind),
            kind=kind,
            occurred_at=self.now,
            user_id=user,
            array_account_id=account,
            detail=by,
        )
        self.outcomes.append(event)
        return event

    # -- images -------------------------------------------------------------------------------------
    def row(self, user: str, account: str) -> dict[str, Any]:
        return dict(self.items[(entitlement_key(user, account)["pk"], entitlement_key(user, account)["sk"])])

    def new_row(self, user: str, account: str, status: str = "Active") -> dict[str, Any]:
        self.tokens += 1
        return {
            **entitlement_key(user, account),
            "userId": user,
            "arrayAccountId": account,
            "status": status,
            "processorToken": f"{TOKEN_CANARY}{self.tokens:04d}",
            "createdAt": stamp(self.now),
            "updatedAt": stamp(self.now),
            "gsi1pk": f"ARRAY#{account}",
            "gsi1sk": "ENTITLEMENT",
        }

    def record(self, keys: dict[str, str], user: str, account: str, ttl: Any) -> dict[str, Any]:
        return {**keys, "userId": user, "arrayAccountId": account, "createdAt": stamp(self.now), "ttl": ttl}

    def set_status(self, user: str, account: str, status: str) -> StreamEvent:
        return self.put({**self.row(user, account), "status": status, "updatedAt": stamp(self.now)})

    def active_account(self, user: str) -> str:
        (account,) = [
            image["arrayAccountId"]
            for (pk, sk), image in self.items.items()
            if pk == f"USER#{user}" and sk.startswith("ENTITLEMENT#") and image["status"] == "Active"
        ]
        return str(account)

    # -- the service's operations (docs/table.md) -----------------------------------------------------
    def signup(self, user: str, account: str) -> StreamEvent:
        self.account_created(user, account)
        return self.put(self.new_row(user, account))

    def relink(self, user: str) -> StreamEvent:
        """SaveIfActive of the image read: the same row, Active, put back whole."""
        account = self.active_account(user)
        return self.put({**self.row(user, account), "updatedAt": stamp(self.now)})

    def second_signup(self, user: str, new_account: str, *, stale_ttl: Any = None) -> StreamEvent:
        """New Active row, the old one Superseded, a stale record on the old account (1 day)."""
        old = self.active_account(user)
        self.account_created(user, new_account, "second_signup")
        self.put(self.new_row(user, new_account))
        self.set_status(user, old, "Superseded")
        ttl = stale_ttl if stale_ttl is not None else epoch(self.now) + DAY
        return self.put(self.record(stale_key(user, old), user, old, ttl))

    def cancel(self, user: str, *, ttl: Any = None) -> StreamEvent:
        """The row Cancelled and the cancellation record (63 days), in one transaction."""
        account = self.active_account(user)
        self.set_status(user, account, "Cancelled")
        expiry = ttl if ttl is not None else epoch(self.now) + 63 * DAY
        return self.put(self.record(cancellation_key(user), user, account, expiry))

    def reactivate(self, user: str) -> None:
        """The service's one delete (the cancellation record) and the row Active again."""
        record = self.items[(f"USER#{user}", "CLEANUP#CANCELLATION")]
        self.delete(cancellation_key(user))
        self.set_status(user, str(record["arrayAccountId"]), "Active")

    def expire(
        self,
        keys: dict[str, str],
        *,
        final: OutcomeKind | None = OutcomeKind.CLEANUP_DELETED,
        mark: bool = True,
        advance: bool = True,
    ) -> StreamEvent:
        """DynamoDB's TTL removes the record (an hour after its ttl); cleanup deletes the account it
        names, records `final`, and marks the row Removed (`mark`) or records the mark failure."""
        record = self.items[(keys["pk"], keys["sk"])]
        user, account = str(record["userId"]), str(record["arrayAccountId"])
        if advance and isinstance(record.get("ttl"), int):
            self.now = max(self.now, datetime.fromtimestamp(record["ttl"], UTC) + timedelta(hours=1))
        source = self.delete(keys, ttl=True)
        self.tick(seconds=2)
        if final is None:
            return source
        self.outcome(final, source, user=user, account=account)
        if final in (OutcomeKind.CLEANUP_DELETED, OutcomeKind.CLEANUP_ALREADY_DELETED):
            if mark:
                self.set_status(user, account, "Removed")
                self.outcome(
                    OutcomeKind.CLEANUP_ROW_MARKED, source, user=user, account=account, detail="marked"
                )
            else:
                self.outcome(OutcomeKind.CLEANUP_MARK_FAILED, source, user=user, account=account, detail="x")
        return source

    # -- landing ------------------------------------------------------------------------------------
    def land(self, lake: Lake, *, flush_rows: int = 7) -> None:
        """Through the lake's own handler, in small files (several flushes), outcomes alongside."""
        handler = LakeHandler(lake, LakeSettings(flush_rows=flush_rows, flush_seconds=3600))
        for event in self.events:
            handler.add(event)
        for outcome in self.outcomes:
            handler.add_outcome(outcome)
        handler.flush()


def clean_story() -> Story:
    """Every path the service takes, with nothing wrong: signups, relinks, a cancellation and its
    reactivation, an expiry ending in a delete and the row Removed, a second signup whose stale record
    expires, an account already gone at Array (404), a cleanup parked then retried."""
    story = Story()
    story.signup("alice", "acct-a1")
    story.tick(minutes=5)
    story.relink("alice")
    story.tick(hours=1)
    story.signup("bob", "acct-b1")
    story.tick(hours=2)
    story.cancel("bob")
    story.tick(days=3)
    story.reactivate("bob")
    story.tick(hours=1)
    story.signup("carol", "acct-c1")
    story.tick(days=1)
    carol_record = story.cancel("carol")
    story.tick(hours=1)
    story.signup("dave", "acct-d1")
    story.tick(hours=3)
    dave_stale = story.second_signup("dave", "acct-d2")
    story.expire(dict(dave_stale.keys), final=OutcomeKind.CLEANUP_ALREADY_DELETED)
    story.tick(days=2)
    story.relink("dave")
    story.signup("erin", "acct-e1")
    story.tick(hours=1)
    erin_stale = story.second_signup("erin", "acct-e2")
    story.tick(days=1, hours=1)
    source = story.expire(dict(erin_stale.keys), final=None, advance=False)
    story.outcome(OutcomeKind.CLEANUP_PARKED, source, user="erin", account="acct-e1", detail="503")
    story.tick(minutes=10)
    story.outcome(OutcomeKind.CLEANUP_RETRIED, source, user="erin", account="acct-e1", attempt=1)
    story.outcome(OutcomeKind.CLEANUP_DELETED, source, user="erin", account="acct-e1", attempt=1)
    story.set_status("erin", "acct-e1", "Removed")
    story.outcome(OutcomeKind.CLEANUP_ROW_MARKED, source, user="erin", account="acct-e1", attempt=1)
    story.tick(days=1)
    story.expire(dict(carol_record.keys))
    story.tick(hours=2)
    story.signup("frank", "acct-f1")
    story.tick(hours=3)
    return story

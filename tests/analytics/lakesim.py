"""A tiny entitlements table for lake tests: it applies the service's writes, emits the typed events
the decoder would, and replays events naively (the oracle the lake is checked against)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from analytics.lake import Lake, LakeHandler
from config import LakeSettings
from pipeline.events import ChangeKind, StreamEvent, StreamPosition, UnknownItemChanged
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id
from schema.table import ItemKind, cancellation_key, entitlement_key, stale_key
from tests.support.table_events import change_event

STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"
CANARY = "PTOK-CANARY-"
SECRET_NOTE = "NOTE-CANARY-"


@dataclass
class TableSim:
    """The table's items plus the events its changes produce, in stream order."""

    shards: tuple[str, ...] = ("shardId-00000001-aaaa",)
    start: datetime = datetime(2026, 1, 1, 23, 0, tzinfo=UTC)
    step: timedelta = timedelta(minutes=7)
    seed: int = 0
    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[StreamEvent] = field(default_factory=list)
    outcomes: list[OutcomeEvent] = field(default_factory=list)
    _sequence: int = 100_000_000_000_000_000_000
    _now: datetime | None = None
    _tokens: int = 0

    def __post_init__(self) -> None:
        self._now = self.start
        self.rng = random.Random(self.seed)

    @property
    def now(self) -> datetime:
        assert self._now is not None
        return self._now

    def _shard_for(self, pk: str) -> str:
        return self.shards[sum(pk.encode()) % len(self.shards)]

    def _emit(
        self,
        keys: dict[str, str],
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
        *,
        ttl: bool = False,
    ) -> StreamEvent:
        self._sequence += self.rng.randint(1, 50)
        self._now = self.now + self.step
        event = change_event(
            keys,
            old,
            new,
            ttl=ttl,
            event_id=f"ev-{self._sequence}",
            position=StreamPosition(
                stream_arn=STREAM_ARN,
                shard_id=self._shard_for(keys["pk"]),
                sequence_number=str(self._sequence),
            ),
            created_at=self.now,
        )
        # The service writes only whole, valid items of the known kinds.
        assert event.item_kind is ItemKind.UNKNOWN or not isinstance(event, UnknownItemChanged)
        self.events.append(event)
        return event

    def put(self, image: dict[str, Any]) -> StreamEvent:
        keys = {"pk": image["pk"], "sk": image["sk"]}
        old = self.items.get((keys["pk"], keys["sk"]))
        self.items[(keys["pk"], keys["sk"])] = dict(image)
        return self._emit(keys, old, dict(image))

    def delete(self, keys: dict[str, str], *, ttl: bool = False) -> StreamEvent | None:
        old = self.items.pop((keys["pk"], keys["sk"]), None)
        if old is None:
            return None
        return self._emit(keys, old, None, ttl=ttl)

    def token(self) -> str:
        self._tokens += 1
        return f"{CANARY}{self.seed}-{self._tokens}"

    # The service's operations ---------------------------------------------------------------------
    def signup(self, user: str, account: str) -> None:
        previous = [
            image
            for (pk, sk), image in self.items.items()
            if pk == f"USER#{user}" and sk.startswith("ENTITLEMENT#") and image["status"] == "Active"
        ]
        self.put(
            {
                **entitlement_key(user, account),
                "userId": user,
                "arrayAccountId": account,
                "status": "Active",
                "createdAt": self.now.isoformat(),
                "updatedAt": self.now.isoformat(),
                "processorToken": self.token(),
                "internalNote": f"{SECRET_NOTE}{user}",
                "gsi1pk": f"ARRAY#{account}",
                "gsi1sk": "ENTITLEMENT",
            }
        )
        for row in previous:
            self.put({**row, "status": "Superseded", "updatedAt": self.now.isoformat()})
            expiry = int((self.now + timedelta(days=1)).timestamp())
            self.put(
                {
                    **stale_key(user, row["arrayAccountId"]),
                    "userId": user,
                    "arrayAccountId": row["arrayAccountId"],
                    "ttl": expiry,
                }
            )

    def cancel(self, user: str, *, ttl: Any = None) -> None:
        for (pk, sk), row in list(self.items.items()):
            if pk == f"USER#{user}" and sk.startswith("ENTITLEMENT#") and row["status"] == "Active":
                self.put({**row, "status": "Cancelled", "updatedAt": self.now.isoformat()})
                expiry = ttl if ttl is not None else int((self.now + timedelta(days=63)).timestamp())
                self.put(
                    {
                        **cancellation_key(user),
                        "userId": user,
                        "arrayAccountId": row["arrayAccountId"],
                        "ttl": expiry,
                    }
                )

    def reactivate(self, user: str) -> None:
        for (pk, sk), row in list(self.items.items()):
            if pk == f"USER#{user}" and sk.startswith("ENTITLEMENT#") and row["status"] == "Cancelled":
                self.delete(cancellation_key(user))
                self.put(
                    {
                        **row,
                        "status": "Active",
                        "updatedAt": self.now.isoformat(),
                        "processorToken": self.token(),
                    }
                )
                return

    def expire(self, keys: dict[str, str]) -> None:
        old = self.items.get((keys["pk"], keys["sk"]))
        if old is None:
            return
        source = self.delete(keys, ttl=True)
        assert source is not None
        account = str(old.get("arrayAccountId"))
        user = str(old.get("userId"))
        self.outcomes.append(
            OutcomeEvent(
                outcome_id=outcome_id(source.event_id, OutcomeKind.CLEANUP_DELETED),
                kind=OutcomeKind.CLEANUP_DELETED,
                occurred_at=self.now,
                user_id=user,
                array_account_id=account,
                source_event_id=source.event_id,
                source_stream_arn=source.position.stream_arn,
                source_shard_id=source.position.shard_id,
                source_sequence_number=source.position.sequence_number,
                detail="200",
            )
        )
        for (pk, sk), row in list(self.items.items()):
            if pk == f"USER#{user}" and sk == f"ENTITLEMENT#{account}":
                self.put({**row, "status": "Removed", "updatedAt": self.now.isoformat()})

    def random_history(self, users: int, operations: int) -> None:
        """A random but valid history over `users` users."""
        accounts = 0
        for _ in range(operations):
            user = f"u{self.rng.randrange(users):03d}"
            choice = self.rng.random()
            if choice < 0.35:
                accounts += 1
                self.signup(user, f"acct{accounts:05d}")
            elif choice < 0.55:
                self.cancel(user)
            elif choice < 0.7:
                self.reactivate(user)
            elif choice < 0.85:
                pending = [k for k in self.items if k[1].startswith("CLEANUP#")]
                if pending:
                    pk, sk = self.rng.choice(sorted(pending))
                    self.expire({"pk": pk, "sk": sk})
            elif choice < 0.95:
                rows = sorted(k for k in self.items if k[1].startswith("ENTITLEMENT#"))
                if rows:
                    pk, sk = self.rng.choice(rows)
                    self.put({**self.items[(pk, sk)], "updatedAt": self.now.isoformat()})
            else:
                self.put(
                    {
                        "pk": f"USER#{user}",
                        "sk": f"ODDITY#{self.rng.randrange(3)}",
                        "note": "x",
                        "processorToken": self.token(),
                    }
                )


def land(lake: Lake, sim: TableSim, *, flush_rows: int) -> None:
    """Land `sim`'s events, then its outcomes, through the lake's own handler (a file every `flush_rows`
    rows), and flush."""
    handler = LakeHandler(lake, LakeSettings(flush_rows=flush_rows))
    for event in sim.events:
        handler.add(event)
    for outcome in sim.outcomes:
        handler.add_outcome(outcome)
    handler.flush()


def replay(
    events: Iterable[StreamEvent], as_of: datetime | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """The naive oracle: apply events in sequence order (duplicates ignored); live items only.
    Values are what the lake should show for an item: status, account, ttl text, sequence number."""
    unique = {(e.position.stream_arn, e.position.shard_id, e.position.sequence_number): e for e in events}
    state: dict[tuple[str, str], dict[str, Any]] = {}
    for event in sorted(unique.values(), key=lambda e: int(e.position.sequence_number)):
        if as_of is not None and event.created_at > as_of:
            continue
        key = (str(event.keys["pk"]), str(event.keys["sk"]))
        if event.change is ChangeKind.REMOVE:
            state.pop(key, None)
            continue
        item = event.new_item
        assert item is not None
        attrs = item.attributes()
        ttl = attrs.get("ttl")
        state[key] = {
            "status": attrs.get("status"),
            "array_account_id": attrs.get("arrayAccountId"),
            "ttl_raw": None if ttl is None else (ttl if isinstance(ttl, str) else str(ttl)),
            "sequence_number": event.position.sequence_number,
            "user_id": event.user_id,
        }
    return state


def state_rows(table: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """A state table (snapshot, as-of, current_items) in the oracle's shape."""
    rows = table.to_pylist() if hasattr(table, "to_pylist") else table
    return {
        (row["pk"], row["sk"]): {
            "status": row["status"],
            "array_account_id": row["array_account_id"],
            "ttl_raw": row["ttl_raw"],
            "sequence_number": row["sequence_number"],
            "user_id": row["user_id"],
        }
        for row in rows
    }


# The source event of an expiry whose final outcome a crash replay recorded again.
REPLAYED_SOURCE = "7de3041dd709b024af6f29e4fa13d34c"


def final_outcome(
    kind: OutcomeKind, *, minute: int, attempt: int = 0, legacy_id: bool = False
) -> OutcomeEvent:
    """A final outcome of one expiry. `legacy_id`: the id lakes written before final outcomes shared
    one identity gave it (source event, kind, attempt)."""
    legacy = hashlib.sha256(f"{REPLAYED_SOURCE}|{kind.value}|{attempt}".encode()).hexdigest()[:32]
    return OutcomeEvent(
        outcome_id=legacy if legacy_id else outcome_id(REPLAYED_SOURCE, kind, attempt),
        kind=kind,
        occurred_at=datetime(2026, 3, 1, 12, minute, tzinfo=UTC),
        user_id="u1",
        array_account_id="acct-1",
        source_event_id=REPLAYED_SOURCE,
        source_stream_arn="arn:aws:dynamodb:eu-west-1:000000000000:table/entitlements/stream/x",
        source_shard_id="shardId-1",
        source_sequence_number="100",
        attempt=attempt,
    )

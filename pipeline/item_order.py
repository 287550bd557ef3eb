"""Per-item duplicates and order, for a source that promises neither: Kinesis Data Streams for DynamoDB.

A DynamoDB stream gives each item's changes once and in order. Kinesis may give a change twice and one
item's changes out of order (AWS's advice: settle both per item, by eventID and
ApproximateCreationDateTime). `ItemOrder.resolve` does that for one read of a shard (the records of one
`process` call, up to the poll's maxRecords), before any handler sees them (`pipeline.shard_consumer`
hands the events in the order returned; the stream's bookkeeping, the checkpoint included, stays in
sequence order):

- duplicates are dropped (counted: `duplicates`, the metric's ``duplicate``), the first copy (the
  lowest sequence number) kept: the same eventID, or the same item with the same change (kind, creation
  time, both images, TTL identity). Both are remembered over the last `memory` changes of the shard, so
  a copy a read later is dropped too;
- each item's changes are ordered by ApproximateCreationDateTime (microseconds: `pipeline.decode`
  normalises both units). Two or more changes of one item in the same microsecond are ordered so that the
  one whose OldImage is the other's NewImage comes second (an absent image after a REMOVE is the one
  before an INSERT), the first starting from the state the item's previous change left where that is
  known (in the read, or the newest change handed from an earlier one): a change and its undoing in one
  microsecond chain both ways, and only that state tells them apart. When no such chain, or more than
  one, joins them they stay in arrival order and are flagged (`ties`, the metric
  ``entitlements_consumer_item_order_changes{resolution="tie"}`` and a warning naming the shard and how
  many: no key, no image);
- the items' changes keep the slots their items had in the read: only one item's own changes trade
  places, so no item waits for another;
- the changes of a tie take their group's position keys in the order they are handed (the lowest key
  to the first): the lake orders an item's rows by that key (`pipeline._kinesis_envelope.change_key`:
  time, then a digest, which is no order within a microsecond), so its current state is the change the
  handlers saw last. The set of keys is the group's own, so a replay of the group, whole or in part,
  finds each key already landed and lands nothing twice.

What it cannot do, and says: a change that arrives a read after a later change of its item was handed
on is handed late, in arrival order, and counted (`late`, the metric's ``late``, and a warning); the
window is one read, since holding a change back past a read would hold the checkpoint back with it (the
lake still orders it right: its key is its time). Memory is per process: a copy of a change
checkpointed by an earlier process is not recognised here (the handlers are idempotent and replay-safe
for exactly that, and the lake lands it once: its position is the first copy's). Three changes of one
item in one tick of the table's precision that return the item to a state it had in that tick (A to B,
B to A, A to B in one millisecond) are indistinguishable from a duplicate; at microsecond precision
that cannot happen.
"""

from __future__ import annotations

__all__ = ["ItemOrder"]

import hashlib
import itertools
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Final, TypeVar

import msgspec

import telemetry
from pipeline.events import StreamEvent, sortable_sequence

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
# Tied changes are ordered by trying every order of them; beyond this many they are flagged unordered.
_MAX_TIED: Final = 6
# Sets and mappings in a deterministic order: equal changes encode to equal bytes.
_encode = msgspec.json.Encoder(order="deterministic").encode


def _follows(later: StreamEvent, earlier: StreamEvent) -> bool:
    """`later` starts from the state `earlier` left (no image: the item absent)."""
    return later.old_item == earlier.new_item


def _state(item: object) -> bytes:
    """A digest of an item's state (an image, or None: the item absent), to remember and compare."""
    return hashlib.blake2b(_encode(item), digest_size=16).digest()


def _chain(tied: list[tuple[_T, StreamEvent]], before: bytes | None) -> list[tuple[_T, StreamEvent]] | None:
    """The one order of `tied` in which each change starts from the state the one before left, or None
    when there is none or more than one. `before`, when known, is the state of the item before the tie
    (`_state`): the first change must start from it. A tie of a change and its undoing (A to B, B to A)
    fits both ways alone; the state before tells which came first. If no order starts from it (a change
    between them was lost or is yet to come), the orders are judged without it."""
    if len(tied) > _MAX_TIED:
        return None
    fits = [
        list(order)
        for order in itertools.permutations(tied)
        if all(_follows(order[i + 1][1], order[i][1]) for i in range(len(order) - 1))
    ]
    if before is not None:
        anchored = [order for order in fits if _state(order[0][1].old_item) == before]
        if anchored:
            fits = anchored
    return fits[0] if len(fits) == 1 else None  # two orders fit: nothing tells them apart


def _keyed_in_order(tied: list[tuple[_T, StreamEvent]]) -> list[tuple[_T, StreamEvent]]:
    """`tied` (in the order handed) with their sequence numbers reassigned so that they ascend in it."""
    numbers = sorted((event.position.sequence_number for _, event in tied), key=sortable_sequence)
    out: list[tuple[_T, StreamEvent]] = []
    for (record, event), number in zip(tied, numbers, strict=True):
        if event.position.sequence_number == number:
            out.append((record, event))
        else:
            position = msgspec.structs.replace(event.position, sequence_number=number)
            out.append((record, msgspec.structs.replace(event, position=position)))
    return out


class _Memory:
    """The last `size` keys seen, oldest forgotten first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._seen: dict[object, None] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._seen

    def add(self, key: object) -> None:
        self._seen[key] = None
        if len(self._seen) > self._size:
            del self._seen[next(iter(self._seen))]


class ItemOrder:
    """One shard's per-item resolution (see the module). Not thread-safe: one per shard consumer.

    `duplicates`, `ties` and `late` count, since it was made, the changes dropped as copies, the changes
    of tied groups left unordered, and the changes handed after a later change of their item."""

    def __init__(self, *, memory: int = 100_000) -> None:
        if memory < 1:
            raise ValueError("memory must be at least 1")
        self._event_ids = _Memory(memory)
        self._changes = _Memory(memory)
        # item -> the newest creation time handed on, and the state the change of that time left
        self._latest: dict[bytes, tuple[datetime, bytes]] = {}
        self._memory = memory
        self.duplicates = 0
        self.ties = 0
        self.late = 0

    def resolve(self, read: Sequence[tuple[_T, StreamEvent]]) -> list[tuple[_T, StreamEvent]]:
        """The read's (record, event) pairs without duplicates, each item's changes in order."""
        slots: dict[bytes, list[int]] = {}  # item -> its slots in the output, in arrival order
        members: dict[bytes, list[tuple[_T, StreamEvent]]] = {}
        kept: list[tuple[_T, StreamEvent] | None] = []
        duplicates = 0
        for pair in read:
            event = pair[1]
            item = _encode(event.keys)
            # A digest, not the encoding: the memory holds `memory` of them, and two images are ~1 kB.
            change = hashlib.blake2b(
                _encode(
                    (item, event.change, event.created_at, event.ttl_deletion, event.old_item, event.new_item)
                ),
                digest_size=16,
            ).digest()
            if event.event_id in self._event_ids or change in self._changes:
                self.duplicates += 1
                duplicates += 1
                continue
            self._event_ids.add(event.event_id)
            self._changes.add(change)
            slots.setdefault(item, []).append(len(kept))
            members.setdefault(item, []).append(pair)
            kept.append(None)
        for item, pairs in members.items():
            for slot, pair in zip(slots[item], self._ordered(item, pairs), strict=True):
                kept[slot] = pair
        if duplicates:
            telemetry.item_order("duplicate", duplicates)
        return [pair for pair in kept if pair is not None]

    def _ordered(self, item: bytes, pairs: list[tuple[_T, StreamEvent]]) -> list[tuple[_T, StreamEvent]]:
        if len(pairs) > 1:
            pairs = sorted(pairs, key=lambda pair: pair[1].created_at)  # stable: ties in arrival order
            out: list[tuple[_T, StreamEvent]] = []
            for created, group in itertools.groupby(pairs, key=lambda pair: pair[1].created_at):
                tied = list(group)
                if len(tied) > 1:
                    chained = _chain(tied, self._state_before(item, created, out))
                    if chained is None:
                        self._flag_tie(tied[0][1], len(tied))
                    else:
                        tied = chained
                    tied = _keyed_in_order(tied)
                out += tied
            pairs = out
        self._note_latest(item, pairs)
        return pairs

    def _state_before(
        self, item: bytes, created: datetime, out: list[tuple[_T, StreamEvent]]
    ) -> bytes | None:
        """The item's state before its changes at `created`: the one its change before them in this read
        left, else the one the newest change handed in an earlier read left, if that was before."""
        if out:
            return _state(out[-1][1].new_item)
        latest = self._latest.get(item)
        if latest is not None and latest[0] < created:
            return latest[1]
        return None

    def _note_latest(self, item: bytes, pairs: list[tuple[_T, StreamEvent]]) -> None:
        remembered = self._latest.pop(item, None)  # re-inserted: the most recent item is forgotten last
        before = None if remembered is None else remembered[0]
        if before is not None:
            late = sum(1 for _, event in pairs if event.created_at < before)
            if late:
                self.late += late
                telemetry.item_order("late", late)
                logger.warning(
                    "changes arrived after a later change of their item was handed on; handed late",
                    extra={"shard": pairs[0][1].position.shard_id, "changes": late},
                )
        newest = max(pairs, key=lambda pair: pair[1].created_at)[1]
        if remembered is None or newest.created_at >= remembered[0]:
            # The last of the newest: `pairs` is in the order handed, ties included.
            last = [event for _, event in pairs if event.created_at == newest.created_at][-1]
            self._latest[item] = (last.created_at, _state(last.new_item))
        else:
            self._latest[item] = remembered
        if len(self._latest) > self._memory:
            del self._latest[next(iter(self._latest))]

    def _flag_tie(self, event: StreamEvent, count: int) -> None:
        self.ties += count
        telemetry.item_order("tie", count)
        logger.warning(
            "an item's changes in one microsecond could not be ordered; kept in arrival order",
            extra={"shard": event.position.shard_id, "changes": count},
        )

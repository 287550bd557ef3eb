"""Typed events: what one stream record means for the entitlements table.

The stream envelope (where a record sits: stream, shard, sequence number, event id, time) is kept apart
from the business meaning (which item changed and how). `pipeline.decode` turns raw records into these.
Every event is a frozen msgspec Struct, tagged by its `event_type` (a class attribute, which
`msgspec.json.encode` writes); unknown attributes and statuses are carried, not
refused. Copies are `msgspec.structs.replace`.
"""

from __future__ import annotations

__all__ = [
    "SCHEMA_VERSION",
    "SEQUENCE_RULE",
    "SEQUENCE_WIDTH",
    "ChangeKind",
    "CleanupCancelled",
    "CleanupExpired",
    "CleanupScheduled",
    "CleanupUpdated",
    "EntitlementCreated",
    "EntitlementRemoved",
    "EntitlementStatusChanged",
    "EntitlementUpdated",
    "Event",
    "EventType",
    "ItemExported",
    "StreamEvent",
    "StreamPosition",
    "UnknownItemChanged",
    "is_sequence_number",
    "sortable_sequence",
]

from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from msgspec import Struct

from schema.table import CleanupRecord, EntitlementRow, Item, ItemKind

SCHEMA_VERSION = 1
# AWS documents sequence numbers as 21 to 40 digits; padding to a fixed width makes text order equal
# numeric order in every engine (no SQL integer type holds 40 digits).
SEQUENCE_WIDTH = 48


SEQUENCE_RULE = f"a string of at most {SEQUENCE_WIDTH} decimal digits"


def is_sequence_number(value: object) -> bool:
    """The one sequence-number rule: a string of 1 to `SEQUENCE_WIDTH` ASCII decimal digits."""
    return type(value) is str and 0 < len(value) <= SEQUENCE_WIDTH and value.isascii() and value.isdigit()


def sortable_sequence(sequence_number: str) -> str:
    """The sequence number left-padded with zeros so that string order is numeric order."""
    if not is_sequence_number(sequence_number):
        raise ValueError(f"a sequence number is {SEQUENCE_RULE}")
    return sequence_number.rjust(SEQUENCE_WIDTH, "0")


class ChangeKind(StrEnum):
    INSERT = "INSERT"
    MODIFY = "MODIFY"
    REMOVE = "REMOVE"
    # Not a stream change: an item as a point-in-time export (or a scan) saw it (`ItemExported`).
    EXPORT = "EXPORT"


class EventType(StrEnum):
    ENTITLEMENT_CREATED = "entitlement.created"
    ENTITLEMENT_STATUS_CHANGED = "entitlement.status_changed"
    ENTITLEMENT_UPDATED = "entitlement.updated"
    ENTITLEMENT_REMOVED = "entitlement.removed"  # the row itself was deleted (only an erasure may)
    CLEANUP_SCHEDULED = "cleanup.scheduled"
    CLEANUP_UPDATED = "cleanup.updated"
    CLEANUP_CANCELLED = "cleanup.cancelled"  # deleted by the service (reactivation)
    CLEANUP_EXPIRED = "cleanup.expired"  # deleted by DynamoDB TTL
    UNKNOWN_ITEM = "unknown.item"
    ITEM_EXPORTED = "item.exported"  # an item of a bootstrap's export or scan (analytics.lake.bootstrap)


class StreamPosition(Struct, frozen=True, kw_only=True, gc=False):
    """Where a record sits in the stream: its identity for exactly-once landing. The decoder gives only
    a sequence number of 1 to 48 decimal digits."""

    stream_arn: str
    shard_id: str
    sequence_number: str

    @property
    def sequence_key(self) -> str:
        return sortable_sequence(self.sequence_number)


class StreamEvent(Struct, frozen=True, kw_only=True, gc=False, tag_field="event_type"):
    """Fields every event carries. `old_item`/`new_item` are the typed images (None where absent)."""

    event_type: ClassVar[EventType]
    schema_version: int = SCHEMA_VERSION
    event_id: str
    change: ChangeKind
    position: StreamPosition
    created_at: datetime  # ApproximateCreationDateTime, aware UTC
    keys: dict[str, Any]
    item_kind: ItemKind
    user_id: str | None
    ttl_deletion: bool = False
    old_item: Item | None = None
    new_item: Item | None = None


class EntitlementCreated(
    StreamEvent, tag=EventType.ENTITLEMENT_CREATED.value, frozen=True, kw_only=True, gc=False
):
    event_type: ClassVar[EventType] = EventType.ENTITLEMENT_CREATED
    new_item: EntitlementRow


class EntitlementStatusChanged(
    StreamEvent, tag=EventType.ENTITLEMENT_STATUS_CHANGED.value, frozen=True, kw_only=True, gc=False
):
    event_type: ClassVar[EventType] = EventType.ENTITLEMENT_STATUS_CHANGED
    old_item: EntitlementRow
    new_item: EntitlementRow
    from_status: str
    to_status: str


class EntitlementUpdated(
    StreamEvent, tag=EventType.ENTITLEMENT_UPDATED.value, frozen=True, kw_only=True, gc=False
):
    """A MODIFY that kept the status (a relink, a token refresh)."""

    event_type: ClassVar[EventType] = EventType.ENTITLEMENT_UPDATED
    old_item: EntitlementRow
    new_item: EntitlementRow


class EntitlementRemoved(
    StreamEvent, tag=EventType.ENTITLEMENT_REMOVED.value, frozen=True, kw_only=True, gc=False
):
    event_type: ClassVar[EventType] = EventType.ENTITLEMENT_REMOVED
    old_item: EntitlementRow | None


class CleanupScheduled(
    StreamEvent, tag=EventType.CLEANUP_SCHEDULED.value, frozen=True, kw_only=True, gc=False
):
    event_type: ClassVar[EventType] = EventType.CLEANUP_SCHEDULED
    new_item: CleanupRecord


class CleanupUpdated(StreamEvent, tag=EventType.CLEANUP_UPDATED.value, frozen=True, kw_only=True, gc=False):
    event_type: ClassVar[EventType] = EventType.CLEANUP_UPDATED
    old_item: CleanupRecord
    new_item: CleanupRecord


class CleanupCancelled(
    StreamEvent, tag=EventType.CLEANUP_CANCELLED.value, frozen=True, kw_only=True, gc=False
):
    event_type: ClassVar[EventType] = EventType.CLEANUP_CANCELLED
    old_item: CleanupRecord | None


class CleanupExpired(StreamEvent, tag=EventType.CLEANUP_EXPIRED.value, frozen=True, kw_only=True, gc=False):
    event_type: ClassVar[EventType] = EventType.CLEANUP_EXPIRED
    ttl_deletion: Literal[True] = True
    old_item: CleanupRecord | None


class UnknownItemChanged(StreamEvent, tag=EventType.UNKNOWN_ITEM.value, frozen=True, kw_only=True, gc=False):
    event_type: ClassVar[EventType] = EventType.UNKNOWN_ITEM


class ItemExported(StreamEvent, tag=EventType.ITEM_EXPORTED.value, frozen=True, kw_only=True, gc=False):
    """An item as a point-in-time export (or a bootstrap's scan) holds it: the item's state at the export
    time, not a change the stream carried. Its position names the export (`stream_arn`: the export's
    ARN), the data file (`shard_id`) and a sequence number the bootstrap gives it so that it sorts after
    the item's stream changes before the export time and before those at or after it
    (`pipeline.decode.decode_export_item`). Only the landing takes these; no handler acts on them, so they
    are not part of `Event`."""

    event_type: ClassVar[EventType] = EventType.ITEM_EXPORTED
    change: ChangeKind = ChangeKind.EXPORT
    new_item: Item


Event = (
    EntitlementCreated
    | EntitlementStatusChanged
    | EntitlementUpdated
    | EntitlementRemoved
    | CleanupScheduled
    | CleanupUpdated
    | CleanupCancelled
    | CleanupExpired
    | UnknownItemChanged
)

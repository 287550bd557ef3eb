"""The typed event the decoder gives for one change of a table item: what the tests' table simulators
(tests/analytics/lakesim.py, tests/analytics/audits/story.py) emit for each write they apply."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pipeline.events import (
    ChangeKind,
    CleanupCancelled,
    CleanupExpired,
    CleanupScheduled,
    CleanupUpdated,
    EntitlementCreated,
    EntitlementRemoved,
    EntitlementStatusChanged,
    EntitlementUpdated,
    StreamEvent,
    StreamPosition,
    UnknownItemChanged,
)
from schema.table import CleanupRecord, EntitlementRow, ItemKind, item_kind, parse_item


def change_event(
    keys: dict[str, str],
    old: dict[str, Any] | None,
    new: dict[str, Any] | None,
    *,
    ttl: bool,
    event_id: str,
    position: StreamPosition,
    created_at: datetime,
) -> StreamEvent:
    """The event of the item at `keys` going from image `old` to image `new` (None: absent); `ttl`, a
    removal by DynamoDB's TTL. An image that does not parse to its kind's model gives UnknownItemChanged."""
    change = ChangeKind.INSERT if old is None else ChangeKind.REMOVE if new is None else ChangeKind.MODIFY
    old_item = parse_item(old) if old is not None else None
    new_item = parse_item(new) if new is not None else None
    kind = item_kind(keys["sk"])
    common: dict[str, Any] = {
        "event_id": event_id,
        "change": change,
        "position": position,
        "created_at": created_at,
        "keys": dict(keys),
        "item_kind": kind,
        "user_id": keys["pk"].removeprefix("USER#"),
    }
    if (
        kind is ItemKind.ENTITLEMENT
        and isinstance(new_item, EntitlementRow | None)
        and isinstance(old_item, EntitlementRow | None)
    ):
        if new_item is None:
            return EntitlementRemoved(**common, old_item=old_item, ttl_deletion=ttl)
        if old_item is None:
            return EntitlementCreated(**common, new_item=new_item)
        if old_item.status != new_item.status:
            return EntitlementStatusChanged(
                **common,
                old_item=old_item,
                new_item=new_item,
                from_status=old_item.status,
                to_status=new_item.status,
            )
        return EntitlementUpdated(**common, old_item=old_item, new_item=new_item)
    if (
        kind in (ItemKind.CANCELLATION, ItemKind.STALE)
        and isinstance(new_item, CleanupRecord | None)
        and isinstance(old_item, CleanupRecord | None)
    ):
        if new_item is None and ttl:
            return CleanupExpired(**common, old_item=old_item)
        if new_item is None:
            return CleanupCancelled(**common, old_item=old_item)
        if old_item is None:
            return CleanupScheduled(**common, new_item=new_item)
        return CleanupUpdated(**common, old_item=old_item, new_item=new_item)
    return UnknownItemChanged(**common, old_item=old_item, new_item=new_item, ttl_deletion=ttl)

"""pipeline/events.py: events are frozen msgspec Structs tagged by their event type."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import orjson
import pytest

from pipeline.events import (
    ChangeKind,
    CleanupExpired,
    EventType,
    StreamPosition,
    UnknownItemChanged,
    is_sequence_number,
    sortable_sequence,
)
from schema.table import ItemKind

POSITION = StreamPosition(stream_arn="arn", shard_id="shard-1", sequence_number="42")


def unknown_event() -> UnknownItemChanged:
    return UnknownItemChanged(
        event_id="e-1",
        change=ChangeKind.MODIFY,
        position=POSITION,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        keys={"pk": "X", "sk": "Y"},
        item_kind=ItemKind.UNKNOWN,
        user_id=None,
    )


def test_the_sequence_key_pads_the_sequence_number_so_text_order_is_numeric_order() -> None:
    assert POSITION.sequence_key == "0" * 46 + "42"
    assert sortable_sequence("9") < sortable_sequence("10")


def test_each_event_class_names_its_event_type_and_json_carries_it() -> None:
    event = unknown_event()

    assert event.event_type is EventType.UNKNOWN_ITEM
    assert orjson.loads(msgspec.json.encode(event))["event_type"] == "unknown.item"


def test_an_expiry_is_a_ttl_deletion_by_default() -> None:
    expired = CleanupExpired(
        event_id="e-1",
        change=ChangeKind.REMOVE,
        position=POSITION,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        keys={"pk": "USER#u1", "sk": "CLEANUP#CANCELLATION"},
        item_kind=ItemKind.CANCELLATION,
        user_id="u1",
        old_item=None,
    )

    assert expired.ttl_deletion is True
    assert expired.event_type is EventType.CLEANUP_EXPIRED


def test_events_are_frozen_and_copied_with_replace() -> None:
    event = unknown_event()

    with pytest.raises(AttributeError):
        event.event_id = "e-2"  # type: ignore[misc]
    copy = msgspec.structs.replace(event, event_id="e-2")

    assert (event.event_id, copy.event_id) == ("e-1", "e-2")
    assert copy.position == event.position


def test_a_sequence_number_is_one_to_48_ascii_decimal_digits() -> None:
    assert [is_sequence_number(v) for v in ("1", "9" * 48)] == [True, True]
    assert [is_sequence_number(v) for v in ("", "9" * 49, "12a", "١٢", 12, None)] == [False] * 6

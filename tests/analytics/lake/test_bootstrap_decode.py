"""An export's line becomes an `ItemExported` through the one decoder (pipeline.decode.decode_export_item).

Here beside the bootstrap's tests (the assignment's test paths); it specifies pipeline/decode.py's export
entry point."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import orjson
import pytest

from pipeline.decode import DecodeError, decode_export_item
from pipeline.events import ChangeKind, EventType, ItemExported
from schema.table import CleanupRecord, EntitlementRow, ItemKind, UnknownItem

T = datetime(2026, 11, 30, 12, 0, 0, 123000, tzinfo=UTC)
ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/t/export/01700000000000-0123abcd"


def _decode(item: Any, **overrides: Any) -> ItemExported:
    arguments: dict[str, Any] = {
        "export_arn": ARN,
        "data_file": "abc.json.gz",
        "sequence_number": "42",
        "exported_at": T,
        "event_id": "01700000000000-0123abcd/abc.json.gz/0",
    }
    arguments.update(overrides)
    line = item if isinstance(item, bytes) else orjson.dumps({"Item": item})
    return decode_export_item(line, **arguments)


def _row(**extra: Any) -> dict[str, Any]:
    return {
        "pk": {"S": "USER#u1"},
        "sk": {"S": "ENTITLEMENT#a1"},
        "userId": {"S": "u1"},
        "arrayAccountId": {"S": "a1"},
        "status": {"S": "Active"},
        **extra,
    }


def test_an_entitlement_row_is_an_exported_change_of_its_own_kind() -> None:
    event = _decode(_row())
    assert isinstance(event, ItemExported)
    assert event.event_type is EventType.ITEM_EXPORTED
    assert event.change is ChangeKind.EXPORT
    assert isinstance(event.new_item, EntitlementRow) and event.new_item.status == "Active"
    assert event.old_item is None
    assert event.item_kind is ItemKind.ENTITLEMENT
    assert event.user_id == "u1"
    assert event.keys == {"pk": "USER#u1", "sk": "ENTITLEMENT#a1"}


def test_its_position_names_the_export_the_file_and_the_given_sequence_number() -> None:
    event = _decode(_row())
    assert event.position.stream_arn == ARN
    assert event.position.shard_id == "abc.json.gz"
    assert event.position.sequence_number == "42"


def test_its_time_is_the_export_time_in_utc() -> None:
    event = _decode(_row(), exported_at=T.astimezone(timezone(timedelta(hours=2))))
    assert event.created_at == T and event.created_at.utcoffset() == timedelta(0)


def test_a_cleanup_record_keeps_its_ttl_number_exactly() -> None:
    item = {
        "pk": {"S": "USER#u1"},
        "sk": {"S": "CLEANUP#CANCELLATION"},
        "userId": {"S": "u1"},
        "arrayAccountId": {"S": "a1"},
        "ttl": {"N": "1790000000"},
    }
    event = _decode(item)
    assert isinstance(event.new_item, CleanupRecord)
    assert event.new_item.ttl == 1790000000
    assert event.item_kind is ItemKind.CANCELLATION


def test_numbers_binary_and_sets_are_read_exactly_as_in_a_stream_image() -> None:
    event = _decode(
        _row(
            amount={"N": "12345678901234567890.123456789012345678"},
            blob={"B": "AAE="},
            tags={"SS": ["x", "y"]},
        )
    )
    extras = event.new_item.attributes()
    assert extras["amount"] == Decimal("12345678901234567890.123456789012345678")
    assert extras["blob"] == b"\x00\x01"
    assert extras["tags"] == frozenset({"x", "y"})


def test_an_unknown_item_is_typed_unknown_not_refused() -> None:
    event = _decode({"pk": {"S": "SOMETHING"}, "sk": {"S": "ELSE"}, "x": {"S": "y"}})
    assert isinstance(event.new_item, UnknownItem)
    assert event.item_kind is ItemKind.UNKNOWN
    assert event.user_id is None


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"not json", "export line is not valid JSON"),
        (b'{"Keys": {}}', "export line is not an object holding exactly Item"),
        (b'{"Item": {}, "Other": 1}', "export line is not an object holding exactly Item"),
        (b'{"Item": {}}', "Item is empty"),
        (b'{"Item": {"sk": {"S": "ENTITLEMENT#a"}}}', "Item has no string pk and sk"),
        (b'{"Item": {"pk": {"N": "1"}, "sk": {"S": "x"}}}', "Item has no string pk and sk"),
    ],
)
def test_a_malformed_line_is_refused_naming_the_reason_only(line: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as refused:
        _decode(line)
    assert refused.value.reason == reason
    assert "USER#" not in str(refused.value)


def test_a_malformed_attribute_value_is_refused_as_in_the_stream() -> None:
    with pytest.raises(DecodeError) as refused:
        _decode(_row(amount={"N": "1" * 39}))
    assert refused.value.reason.startswith("Item: ")
    assert "1" * 39 not in str(refused.value)


def test_the_error_names_the_data_file_and_event_never_the_key() -> None:
    with pytest.raises(DecodeError) as refused:
        _decode(b'{"Item": {"pk": {"S": "USER#secret"}}}')
    assert refused.value.context.shard_id == "abc.json.gz"
    assert "secret" not in str(refused.value)


@pytest.mark.parametrize("sequence", ["", "12a", "1" * 49])
def test_a_sequence_number_outside_the_one_rule_is_refused(sequence: str) -> None:
    with pytest.raises(DecodeError):
        _decode(_row(), sequence_number=sequence)


def test_a_naive_export_time_is_refused() -> None:
    with pytest.raises(DecodeError):
        _decode(_row(), exported_at=T.replace(tzinfo=None))

"""Stream records to typed events (`pipeline.decode`), in the KCL adapter shape and the raw shape.

The fixtures are written from the record shapes AWS documents (tests/pipeline/fixtures/*.json, each
says which); the entitlements records follow docs/table.md.
"""

from __future__ import annotations

import contextlib
import copy
import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.decode import decode_record, decode_stream_record
from pipeline.errors import DecodeError
from pipeline.events import (
    SCHEMA_VERSION,
    ChangeKind,
    CleanupCancelled,
    CleanupExpired,
    CleanupScheduled,
    CleanupUpdated,
    EntitlementCreated,
    EntitlementRemoved,
    EntitlementStatusChanged,
    EntitlementUpdated,
    EventType,
    StreamEvent,
    UnknownItemChanged,
)
from schema.errors import TerminalError
from schema.table import (
    CleanupKind,
    CleanupRecord,
    EntitlementRow,
    GuardItem,
    IdempotencyRecord,
    ItemKind,
    UnknownItem,
)

FIXTURES = Path(__file__).parent / "fixtures"
STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-11-30T10:00:00.000"
LAMBDA_EXAMPLE_ARN = (
    "arn:aws:dynamodb:eu-west-1:123456789012:table/ExampleTableWithStream/stream/2015-06-27T00:48:05.899"
)
SHARD = "shardId-00000001732960800000-5f0e8c1a"
USER = "3f1c2b9e-8d7a-4c1e-9b2f-5a6d7e8f9012"


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


ADAPTER = fixture("entitlements_adapter_records.json")
RAW = fixture("entitlements_raw_records.json")


def adapter_record(name: str) -> dict[str, Any]:
    """A fresh copy of a named adapter-shape record, to change in a test."""
    return copy.deepcopy(ADAPTER[name])


def decode(record: dict[str, Any], **kwargs: Any) -> StreamEvent:
    # json, not orjson: it writes integers of any size, as a malformed record may hold.
    return decode_record(json.dumps(record).encode(), stream_arn=STREAM_ARN, shard_id=SHARD, **kwargs)


# -- the documented examples ----------------------------------------------------------------------------


def test_documented_lambda_event_decodes_in_the_raw_shape() -> None:
    records = fixture("aws_lambda_event.json")["Records"]
    events = [decode_stream_record(r, stream_arn=LAMBDA_EXAMPLE_ARN, shard_id=SHARD) for r in records]

    assert [e.change for e in events] == [ChangeKind.INSERT, ChangeKind.MODIFY, ChangeKind.REMOVE]
    assert all(isinstance(e, UnknownItemChanged) for e in events)  # not an entitlements table item
    assert all(e.keys == {"Id": 101} for e in events)
    assert all(e.created_at == datetime(2015, 4, 9, tzinfo=UTC) for e in events)
    assert [e.position.sequence_number for e in events] == [
        "4421584500000000017450439091",
        "4421584500000000017450439092",
        "4421584500000000017450439093",
    ]
    insert, modify, remove = events
    assert isinstance(insert.new_item, UnknownItem)
    assert insert.new_item.extra == {"Id": 101, "Message": "New item!"}
    assert insert.old_item is None
    assert modify.old_item is not None
    assert modify.old_item.extra == {"Id": 101, "Message": "New item!"}
    assert modify.new_item is not None
    assert modify.new_item.extra == {"Id": 101, "Message": "This item has changed"}
    assert remove.new_item is None
    assert remove.old_item is not None


def test_documented_getrecords_records_decode_with_float_seconds_and_no_images() -> None:
    records = fixture("aws_getrecords_response.json")["Records"]
    events = [decode_stream_record(r, stream_arn=STREAM_ARN, shard_id=SHARD) for r in records]

    assert [e.event_id for e in events] == [r["eventID"] for r in records]
    assert events[0].created_at == datetime(2016, 6, 1, 18, 41, tzinfo=UTC)  # 1.46480646E9
    assert events[0].keys == {"ForumName": "DynamoDB", "Subject": "DynamoDB Thread 3"}
    assert all(e.old_item is None and e.new_item is None for e in events)  # KEYS_ONLY
    assert all(e.item_kind is ItemKind.UNKNOWN and e.user_id is None for e in events)


def test_documented_ttl_removal_is_a_cleanup_expiry() -> None:
    (record,) = fixture("aws_ttl_removal.json")["Records"]
    event = decode_stream_record(record, stream_arn=STREAM_ARN, shard_id=SHARD)

    assert isinstance(event, CleanupExpired)
    assert event.ttl_deletion is True
    assert event.event_type is EventType.CLEANUP_EXPIRED
    assert isinstance(event.old_item, CleanupRecord)
    assert event.old_item.cleanup_kind is CleanupKind.STALE
    assert event.old_item.ttl_epoch_seconds == 1767139200
    assert event.position.sequence_number == "7000000000000000000000000000000000000123"  # 40 digits


# -- classification (adapter shape) ---------------------------------------------------------------------


def test_a_signup_insert_is_entitlement_created() -> None:
    event = decode(ADAPTER["signup"])

    assert isinstance(event, EntitlementCreated)
    assert event.change is ChangeKind.INSERT
    assert event.item_kind is ItemKind.ENTITLEMENT
    assert event.new_item.status == "Active"
    assert event.new_item.arrayAccountId == "acc-7d9e2f4a1b3c"
    assert event.old_item is None


def test_a_modify_that_changes_the_status_is_status_changed_from_and_to() -> None:
    event = decode(ADAPTER["cancellation"])

    assert isinstance(event, EntitlementStatusChanged)
    assert (event.from_status, event.to_status) == ("Active", "Cancelled")
    assert event.old_item.status == "Active"
    assert event.new_item.status == "Cancelled"


def test_a_modify_that_keeps_the_status_is_entitlement_updated() -> None:
    event = decode(ADAPTER["relink"])

    assert isinstance(event, EntitlementUpdated)
    assert event.old_item.processorToken == "processor-sandbox-1111"
    assert event.new_item.processorToken == "processor-sandbox-2222"


def test_removing_an_entitlement_row_is_entitlement_removed() -> None:
    event = decode(ADAPTER["erasure_of_row"])

    assert isinstance(event, EntitlementRemoved)
    assert isinstance(event.old_item, EntitlementRow)
    assert event.ttl_deletion is False


@pytest.mark.parametrize(
    ("name", "kind"),
    [("cancellation_scheduled", CleanupKind.CANCELLATION), ("stale_scheduled", CleanupKind.STALE)],
)
def test_inserting_a_cleanup_record_is_cleanup_scheduled(name: str, kind: CleanupKind) -> None:
    event = decode(ADAPTER[name])

    assert isinstance(event, CleanupScheduled)
    assert event.new_item.cleanup_kind is kind
    assert event.item_kind.value == kind.value


def test_modifying_a_cleanup_record_is_cleanup_updated() -> None:
    event = decode(ADAPTER["cancellation_rescheduled"])

    assert isinstance(event, CleanupUpdated)
    assert (event.old_item.ttl, event.new_item.ttl) == (1778054400, 1778140800)


def test_a_delete_by_the_service_is_cleanup_cancelled_not_expired() -> None:
    event = decode(ADAPTER["reactivation_deletes_cancellation"])

    assert isinstance(event, CleanupCancelled)
    assert event.ttl_deletion is False
    assert isinstance(event.old_item, CleanupRecord)


def test_a_delete_by_the_ttl_identity_is_cleanup_expired() -> None:
    event = decode(ADAPTER["stale_expired_by_ttl"])

    assert isinstance(event, CleanupExpired)
    assert event.ttl_deletion is True
    assert event.old_item is not None
    assert event.old_item.arrayAccountId == "acc-0a1b2c3d4e5f"


def test_a_delete_by_another_service_identity_is_not_an_expiry() -> None:
    record = adapter_record("stale_expired_by_ttl")
    record["userIdentity"] = {"principalId": "replication.dynamodb.amazonaws.com", "type": "Service"}

    event = decode(record)

    assert isinstance(event, CleanupCancelled)
    assert event.ttl_deletion is False


def test_an_entitlement_row_deleted_by_ttl_is_flagged_as_a_ttl_deletion() -> None:
    record = adapter_record("erasure_of_row")
    record["userIdentity"] = {"principalId": "dynamodb.amazonaws.com", "type": "Service"}

    event = decode(record)

    assert isinstance(event, EntitlementRemoved)
    assert event.ttl_deletion is True


def test_the_ttl_identity_on_a_modify_is_not_a_ttl_deletion() -> None:
    record = adapter_record("relink")
    record["userIdentity"] = {"principalId": "dynamodb.amazonaws.com", "type": "Service"}

    assert decode(record).ttl_deletion is False


def test_an_unknown_sort_key_is_unknown_item_changed() -> None:
    event = decode(ADAPTER["unknown_item"])

    assert isinstance(event, UnknownItemChanged)
    assert event.event_type is EventType.UNKNOWN_ITEM
    assert event.item_kind is ItemKind.UNKNOWN
    assert isinstance(event.new_item, UnknownItem)
    assert event.new_item.extra == {"displayName": "A. User", "flags": frozenset({"beta", "early"})}
    assert event.user_id == USER


def test_the_users_guard_changing_is_a_change_of_its_own_kind_with_typed_images() -> None:
    record = adapter_record("stale_expired_by_ttl")
    record.pop("userIdentity")
    keys = {"pk": {"S": f"USER#{USER}"}, "sk": {"S": "#GUARD"}}
    image = {**keys, "userId": {"S": USER}, "updatedAt": {"S": "2026-12-01T09:00:00.000Z"}}
    record["eventName"] = "MODIFY"
    record["dynamodb"].update(
        Keys=keys, OldImage={**image, "version": {"N": "3"}}, NewImage={**image, "version": {"N": "4"}}
    )

    event = decode(record)

    assert isinstance(event, UnknownItemChanged)  # no entitlement or cleanup meaning: nothing acts on it
    assert event.item_kind is ItemKind.GUARD
    assert isinstance(event.new_item, GuardItem)
    assert (event.new_item.version, event.user_id) == (4, USER)


def test_an_idempotency_record_expired_by_ttl_is_not_a_cleanup_expiry() -> None:
    record = adapter_record("stale_expired_by_ttl")
    keys = {"pk": {"S": f"USER#{USER}"}, "sk": {"S": "IDEMPOTENCY#d1"}}
    record["dynamodb"].update(
        Keys=keys,
        OldImage={
            **keys,
            "userId": {"S": USER},
            "requestDigest": {"S": "r"},
            "responseStatus": {"N": "201"},
            "responseBody": {"S": "{}"},
            "ttl": {"N": "1800000000"},
        },
    )

    event = decode(record)

    assert isinstance(event, UnknownItemChanged)
    assert (event.item_kind, event.ttl_deletion) == (ItemKind.IDEMPOTENCY, True)
    assert isinstance(event.old_item, IdempotencyRecord)


# -- what every event carries ---------------------------------------------------------------------------


def test_every_event_carries_the_envelope() -> None:
    event = decode(ADAPTER["cancellation"])

    assert event.schema_version == SCHEMA_VERSION
    assert event.event_id == "2c9a5d2f7a1b4e8dae3c4b5a6e7d8c9b"
    assert event.position.stream_arn == STREAM_ARN
    assert event.position.shard_id == SHARD
    assert event.keys == {"pk": f"USER#{USER}", "sk": "ENTITLEMENT#acc-7d9e2f4a1b3c"}
    assert event.user_id == USER


def test_the_sequence_number_is_kept_as_the_exact_string() -> None:
    record = adapter_record("relink")
    record["dynamodb"]["SequenceNumber"] = "0000000000000000000000000000000000000042"

    event = decode(record)

    assert event.position.sequence_number == "0000000000000000000000000000000000000042"
    assert event.position.sequence_key == "42".rjust(48, "0")


def test_the_creation_time_is_aware_utc_from_epoch_milliseconds() -> None:
    event = decode(ADAPTER["signup"])  # 1772611200123 ms

    assert event.created_at == datetime(2026, 3, 4, 8, 0, 0, 123000, tzinfo=UTC)
    assert event.created_at.utcoffset() == timedelta(0)


@given(st.integers(0, 2**45))
def test_creation_times_in_milliseconds_are_exact(millis: int) -> None:
    record = adapter_record("signup")
    record["dynamodb"]["ApproximateCreationDateTime"] = millis

    expected = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)
    assert decode(record).created_at == expected


def test_the_user_id_falls_back_to_the_partition_key() -> None:
    record = adapter_record("reactivation_deletes_cancellation")
    del record["dynamodb"]["OldImage"]  # a KEYS_ONLY view

    event = decode(record)

    assert isinstance(event, CleanupCancelled)
    assert event.old_item is None
    assert event.user_id == USER


def test_the_user_id_is_none_without_a_user_key() -> None:
    record = adapter_record("unknown_item")
    record["dynamodb"]["Keys"]["pk"] = {"S": "TENANT#1"}
    del record["dynamodb"]["NewImage"]

    assert decode(record).user_id is None


def test_the_kcl_sequence_number_fills_a_missing_one() -> None:
    record = adapter_record("relink")
    del record["dynamodb"]["SequenceNumber"]

    event = decode(record, sequence_number="49600000000000000000000000000000000003")

    assert event.position.sequence_number == "49600000000000000000000000000000000003"


def test_the_kcl_sequence_number_must_match_the_records_own() -> None:
    with pytest.raises(DecodeError, match="differs"):
        decode(ADAPTER["relink"], sequence_number="49600000000000000000000000000000000099")


# -- a new attribute or status never raises -------------------------------------------------------------


def test_a_new_attribute_is_carried_not_refused() -> None:
    record = adapter_record("relink")
    record["dynamodb"]["NewImage"]["referral"] = {"M": {"code": {"S": "XY"}, "blob": {"B": "AAE="}}}

    event = decode(record)

    assert isinstance(event, EntitlementUpdated)
    assert event.new_item.extra_attributes == {"referral": {"code": "XY", "blob": b"\x00\x01"}}


def test_an_unknown_status_is_carried_not_refused() -> None:
    record = adapter_record("cancellation")
    record["dynamodb"]["NewImage"]["status"] = {"S": "Paused"}

    event = decode(record)

    assert isinstance(event, EntitlementStatusChanged)
    assert event.to_status == "Paused"
    assert event.new_item.known_status is None


def test_an_entitlement_image_missing_a_required_attribute_is_unknown_item_changed() -> None:
    record = adapter_record("relink")
    del record["dynamodb"]["NewImage"]["arrayAccountId"]

    event = decode(record)

    assert isinstance(event, UnknownItemChanged)
    assert event.item_kind is ItemKind.ENTITLEMENT  # the keys say what it should have been
    assert isinstance(event.new_item, UnknownItem)
    assert isinstance(event.old_item, EntitlementRow)


def test_an_entitlement_status_that_is_not_a_string_is_unknown_item_changed() -> None:
    record = adapter_record("cancellation")
    record["dynamodb"]["NewImage"]["status"] = {"N": "2"}

    event = decode(record)

    assert isinstance(event, UnknownItemChanged)
    assert isinstance(event.new_item, UnknownItem)
    assert event.new_item.extra["status"] == 2


def test_a_modify_without_its_old_image_is_unknown_item_changed() -> None:
    record = adapter_record("relink")
    del record["dynamodb"]["OldImage"]  # a NEW_IMAGE view

    event = decode(record)

    assert isinstance(event, UnknownItemChanged)
    assert isinstance(event.new_item, EntitlementRow)


def test_a_cleanup_ttl_written_as_a_string_is_kept_as_written() -> None:
    record = adapter_record("stale_scheduled")
    record["dynamodb"]["NewImage"]["ttl"] = {"S": "1772697600"}

    event = decode(record)

    assert isinstance(event, CleanupScheduled)
    assert event.new_item.ttl == "1772697600"
    assert event.new_item.ttl_epoch_seconds is None


def test_an_attribute_named_like_the_models_kind_field_is_handled_as_parse_item_does() -> None:
    record = adapter_record("relink")
    record["dynamodb"]["NewImage"]["kind"] = {"S": "premium"}

    event = decode(record)

    assert isinstance(event, EntitlementUpdated)
    assert event.new_item.kind is ItemKind.ENTITLEMENT


# -- the raw GetRecords / Lambda shape ------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in RAW if not n.startswith("_")])
def test_raw_records_decode_to_the_same_events_as_adapter_records(name: str) -> None:
    raw_event = decode_stream_record(RAW[name], stream_arn=STREAM_ARN, shard_id=SHARD)
    adapter_event = decode(ADAPTER[name])

    assert raw_event == adapter_event


def test_a_raw_ttl_removal_with_capitalised_identity_keys_is_an_expiry() -> None:
    event = decode_stream_record(RAW["stale_expired_by_ttl"], stream_arn=STREAM_ARN, shard_id=SHARD)

    assert isinstance(event, CleanupExpired)


def test_a_creation_time_from_boto3_is_converted_to_utc() -> None:
    record = copy.deepcopy(RAW["signup"])
    record["dynamodb"]["ApproximateCreationDateTime"] = datetime(
        2026, 3, 4, 10, 0, tzinfo=timezone(timedelta(hours=2))
    )

    event = decode_stream_record(record, stream_arn=STREAM_ARN, shard_id=SHARD)

    assert event.created_at == datetime(2026, 3, 4, 8, 0, tzinfo=UTC)
    assert event.created_at.tzinfo is UTC


def test_a_naive_creation_time_is_refused() -> None:
    record = copy.deepcopy(RAW["signup"])
    record["dynamodb"]["ApproximateCreationDateTime"] = datetime(2026, 3, 4, 8, 0)

    with pytest.raises(DecodeError, match="no time zone"):
        decode_stream_record(record, stream_arn=STREAM_ARN, shard_id=SHARD)


@pytest.mark.parametrize("seconds", [1772611200, 1772611200.123, Decimal("1772611200.123")])
def test_raw_creation_times_are_epoch_seconds(seconds: float | Decimal) -> None:
    record = copy.deepcopy(RAW["signup"])
    record["dynamodb"]["ApproximateCreationDateTime"] = seconds

    event = decode_stream_record(record, stream_arn=STREAM_ARN, shard_id=SHARD)

    assert event.created_at.replace(microsecond=0) == datetime(2026, 3, 4, 8, 0, tzinfo=UTC)
    assert event.created_at.microsecond in (0, 123000)


def test_binary_keys_as_boto3_gives_them_are_accepted() -> None:
    record = {
        "eventID": "1",
        "eventName": "INSERT",
        "dynamodb": {
            "ApproximateCreationDateTime": datetime(2026, 3, 4, tzinfo=UTC),
            "Keys": {"pk": {"B": b"\x00\xff"}},
            "NewImage": {"pk": {"B": b"\x00\xff"}, "tags": {"BS": [b"\x01", b"\x02"]}},
            "SequenceNumber": "1",
        },
    }

    event = decode_stream_record(record, stream_arn=STREAM_ARN, shard_id=SHARD)

    assert event.keys == {"pk": b"\x00\xff"}
    assert event.new_item is not None
    assert event.new_item.extra == {"tags": frozenset({b"\x01", b"\x02"})}


def test_a_record_from_another_stream_is_refused() -> None:
    record = fixture("aws_lambda_event.json")["Records"][0]

    with pytest.raises(DecodeError, match="eventSourceARN"):
        decode_stream_record(record, stream_arn=STREAM_ARN, shard_id=SHARD)


def test_a_raw_attribute_name_that_is_not_valid_unicode_is_refused_without_naming_it() -> None:
    # A lone surrogate: JSON cannot carry one, a Python mapping can; no UTF-8 writer can write it.
    record = copy.deepcopy(RAW["cancellation"])
    record["dynamodb"]["NewImage"]["\ud800note"] = {"S": SECRET}

    with pytest.raises(DecodeError, match="attribute name is not valid Unicode text") as caught:
        decode_stream_record(record, stream_arn=STREAM_ARN, shard_id=SHARD)

    assert SECRET not in str(caught.value)
    assert "note" not in str(caught.value)


def test_decoding_a_raw_record_leaves_it_unchanged() -> None:
    record = copy.deepcopy(RAW["cancellation"])

    decode_stream_record(record, stream_arn=STREAM_ARN, shard_id=SHARD)

    assert record == RAW["cancellation"]


# -- refusals -------------------------------------------------------------------------------------------

SECRET = "SECRET-7f3e"  # planted in every malformed record: no error message may show it
SECRET_DIGITS = "98765432109876543210987654321098765432109"  # 41 digits


def _malformed(change: Any) -> bytes:
    record = adapter_record("relink")
    record["dynamodb"]["NewImage"]["note"] = {"S": SECRET}
    record["dynamodb"]["Keys"]["pk"] = {"S": f"USER#{SECRET}"}
    change(record)
    return orjson.dumps(record)


MALFORMED: dict[str, tuple[bytes, str]] = {
    "not json": (f'{{"eventID": "{SECRET}", '.encode(), "not valid JSON"),
    "not an object": (orjson.dumps([SECRET]), "not a JSON object"),
    "no eventID": (_malformed(lambda r: r.pop("eventID")), "eventID"),
    "eventID not text": (_malformed(lambda r: r.__setitem__("eventID", [SECRET])), "eventID"),
    "unknown eventName": (_malformed(lambda r: r.__setitem__("eventName", SECRET)), "eventName"),
    "no dynamodb": (_malformed(lambda r: r.pop("dynamodb")), "dynamodb"),
    "no sequence": (_malformed(lambda r: r["dynamodb"].pop("SequenceNumber")), "SequenceNumber is missing"),
    "bad sequence": (
        _malformed(lambda r: r["dynamodb"].__setitem__("SequenceNumber", SECRET)),
        "SequenceNumber is not",
    ),
    "sequence too wide": (
        _malformed(lambda r: r["dynamodb"].__setitem__("SequenceNumber", "1" * 49)),
        "SequenceNumber is not",
    ),
    "no creation time": (
        _malformed(lambda r: r["dynamodb"].pop("ApproximateCreationDateTime")),
        "ApproximateCreationDateTime",
    ),
    "creation time as text": (
        _malformed(lambda r: r["dynamodb"].__setitem__("ApproximateCreationDateTime", SECRET)),
        "ApproximateCreationDateTime",
    ),
    "creation time out of range": (
        _malformed(lambda r: r["dynamodb"].__setitem__("ApproximateCreationDateTime", 10**18)),
        "out of range",
    ),
    "no keys": (_malformed(lambda r: r["dynamodb"].pop("Keys")), "Keys is missing"),
    "keys not an object": (_malformed(lambda r: r["dynamodb"].__setitem__("Keys", [SECRET])), "Keys:"),
    "two type keys": (
        _malformed(lambda r: r["dynamodb"]["NewImage"].__setitem__("status", {"S": SECRET, "N": "1"})),
        "NewImage: attribute value does not have exactly one type key",
    ),
    "39 digits": (
        _malformed(lambda r: r["dynamodb"]["OldImage"].__setitem__("score", {"N": SECRET_DIGITS})),
        "OldImage: N has more than 38 significant digits",
    ),
    "bad base64": (
        _malformed(lambda r: r["dynamodb"]["Keys"].__setitem__("sk", {"B": SECRET})),
        "Keys: B is not valid base64",
    ),
    "identity not an object": (_malformed(lambda r: r.__setitem__("userIdentity", SECRET)), "userIdentity"),
    "identity without type or principal": (
        _malformed(lambda r: r.__setitem__("userIdentity", {SECRET: SECRET})),
        "userIdentity",
    ),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_record_raises_decode_error_that_names_the_reason_only(name: str) -> None:
    data, reason = MALFORMED[name]

    with pytest.raises(DecodeError) as caught:
        decode_record(data, stream_arn=STREAM_ARN, shard_id=SHARD)

    error = caught.value
    assert reason in error.reason
    assert SECRET not in str(error)
    assert SECRET_DIGITS[:10] not in str(error)
    assert "USER#" not in str(error)
    assert error.__cause__ is None  # no chained exception carrying the input either
    assert error.__suppress_context__
    assert error.context.shard_id == SHARD


def test_a_decode_error_is_terminal() -> None:
    assert issubclass(DecodeError, TerminalError)


def test_a_decode_error_carries_the_records_position() -> None:
    record = adapter_record("relink")
    record["dynamodb"]["NewImage"]["status"] = {"S": "Active", "N": "1"}

    with pytest.raises(DecodeError) as caught:
        decode(record)

    context = caught.value.context
    assert context.sequence_number == "49600000000000000000000000000000000003"
    assert context.event_id == "3dab6e3a8b2c4f9ebf4d5c6b7f8e9dac"
    assert "seq=49600000000000000000000000000000000003" in str(caught.value)


def test_a_malformed_raw_record_raises_decode_error() -> None:
    with pytest.raises(DecodeError, match="dynamodb section"):
        decode_stream_record({"eventID": "1", "eventName": "INSERT"}, stream_arn=STREAM_ARN, shard_id=SHARD)
    with pytest.raises(DecodeError, match="not an object"):
        decode_stream_record([], stream_arn=STREAM_ARN, shard_id=SHARD)  # type: ignore[arg-type]


# -- properties -----------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=16,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_any_json_either_decodes_or_raises_decode_error(value: Any) -> None:
    with contextlib.suppress(DecodeError):
        decode_record(json.dumps(value).encode(), stream_arn=STREAM_ARN, shard_id=SHARD)


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*path, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths(child, (*path, index))
    return found


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([n for n in ADAPTER if not n.startswith("_")]), st.data())
def test_a_record_with_any_part_replaced_either_decodes_or_raises_decode_error(name: str, data: Any) -> None:
    record = adapter_record(name)
    path = data.draw(st.sampled_from(_paths(record)[1:]))
    replacement = data.draw(json_values)
    parent = record
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = replacement

    try:
        event = decode(record)
    except DecodeError:
        return
    assert isinstance(event, StreamEvent)


def test_an_empty_image_from_the_adapter_counts_as_no_image() -> None:
    # Seen from the real adapter on moto: an INSERT carries "OldImage": {}.
    record = {
        "eventID": "e-empty-old",
        "eventName": "INSERT",
        "eventVersion": "1.0",
        "eventSource": "aws:dynamodb",
        "awsRegion": "eu-west-1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1796033513579,
            "Keys": {"pk": {"S": "USER#u0"}, "sk": {"S": "ENTITLEMENT#a"}},
            "NewImage": {
                "pk": {"S": "USER#u0"},
                "sk": {"S": "ENTITLEMENT#a"},
                "userId": {"S": "u0"},
                "arrayAccountId": {"S": "a"},
                "status": {"S": "Active"},
            },
            "OldImage": {},
            "SequenceNumber": "1100000000017454423009",
            "SizeBytes": 308,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }

    event = decode_record(json.dumps(record).encode(), stream_arn="arn", shard_id="shard")
    assert event.event_type.value == "entitlement.created"
    assert event.old_item is None

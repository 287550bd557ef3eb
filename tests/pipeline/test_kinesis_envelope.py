"""Kinesis Data Streams for DynamoDB records to typed events (`pipeline.decode.decode_record` with a
`KinesisSource`, through `pipeline._kinesis_envelope`): one event model over both sources.

The Kinesis records are the adapter fixtures' changes in Kinesis's documented envelope
(tests/pipeline/_kinesis_records.py): the same change decodes into the same event whichever envelope
carried it, the position aside.
"""

from __future__ import annotations

import copy
import logging
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from pipeline.decode import KinesisSource, decode_record
from pipeline.errors import DecodeError
from pipeline.events import (
    SEQUENCE_WIDTH,
    CleanupCancelled,
    CleanupExpired,
    StreamEvent,
    StreamPosition,
)
from tests.pipeline._kinesis_records import (
    KINESIS_ARN,
    KINESIS_SEQUENCE,
    SHARD,
    STREAMS_ARN,
    TABLE,
    adapter_records,
    data,
    decode_kinesis,
    entitlement_change,
    kinesis_envelope,
)

RECORDS = adapter_records()
USER = "3f1c2b9e-8d7a-4c1e-9b2f-5a6d7e8f9012"
ACCOUNT = "acc-7d9e2f4a1b3c"
_NOWHERE = StreamPosition(stream_arn="-", shard_id="-", sequence_number="0")


def from_streams(name: str) -> StreamEvent:
    record = RECORDS[name]
    return decode_record(
        data(record),
        stream_arn=STREAMS_ARN,
        shard_id=SHARD,
        sequence_number=record["dynamodb"]["SequenceNumber"],
    )


def meaning(event: StreamEvent) -> StreamEvent:
    """The event without where it sits."""
    return msgspec.structs.replace(event, position=_NOWHERE)


# -- one event model ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_a_change_in_kinesis_envelope_decodes_into_the_event_the_dynamodb_stream_gives(name: str) -> None:
    assert meaning(decode_kinesis(kinesis_envelope(RECORDS[name]))) == meaning(from_streams(name))


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_a_change_with_its_time_in_microseconds_decodes_into_the_same_event(name: str) -> None:
    in_micros = decode_kinesis(kinesis_envelope(RECORDS[name], micros=True))

    assert meaning(in_micros) == meaning(from_streams(name))


def test_a_time_in_milliseconds_is_read_as_milliseconds() -> None:
    record = entitlement_change(event_id="e1", created=1772611200123, old_status=None, new_status="Active")

    assert decode_kinesis(record).created_at == datetime(2026, 3, 4, 8, 0, 0, 123000, tzinfo=UTC)


def test_a_time_in_microseconds_keeps_its_microseconds() -> None:
    record = entitlement_change(event_id="e1", created=1772611200123456, old_status=None, new_status="Active")

    assert decode_kinesis(record).created_at == datetime(2026, 3, 4, 8, 0, 0, 123456, tzinfo=UTC)


def test_a_ttl_delete_carrying_the_service_identity_is_a_cleanup_expiry() -> None:
    event = decode_kinesis(kinesis_envelope(RECORDS["stale_expired_by_ttl"]))

    assert isinstance(event, CleanupExpired)
    assert event.ttl_deletion is True


def test_a_delete_with_a_null_identity_is_the_services_own_cancellation() -> None:
    record = kinesis_envelope(RECORDS["stale_expired_by_ttl"])
    record["userIdentity"] = None

    event = decode_kinesis(record)

    assert isinstance(event, CleanupCancelled)
    assert event.ttl_deletion is False


# -- the position ---------------------------------------------------------------------------------------


def test_the_position_names_the_kinesis_stream_and_shard_it_was_read_from() -> None:
    event = decode_kinesis(kinesis_envelope(RECORDS["signup"]), shard_id="shardId-000000000007")

    assert (event.position.stream_arn, event.position.shard_id) == (KINESIS_ARN, "shardId-000000000007")


def test_the_sequence_number_is_the_change_time_in_microseconds_then_a_digest_at_the_lakes_width() -> None:
    record = entitlement_change(event_id="e1", created=1772611200123456, old_status=None, new_status="Active")

    number = decode_kinesis(record).position.sequence_number

    assert len(number) == SEQUENCE_WIDTH
    assert number.isdigit()
    assert number[:17] == "01772611200123456"


def test_a_real_56_digit_kinesis_sequence_number_is_read() -> None:
    assert len(KINESIS_SEQUENCE) == 56
    decode_kinesis(kinesis_envelope(RECORDS["signup"]), sequence_number=KINESIS_SEQUENCE)


def test_two_copies_of_a_change_at_other_kinesis_sequence_numbers_have_one_position() -> None:
    record = kinesis_envelope(RECORDS["cancellation"])

    first = decode_kinesis(record, sequence_number="49546986683135544286507457936321625675700192471156785154")
    copy_ = decode_kinesis(record, sequence_number="49546986683135544286507457936321625675700192471156799999")

    assert first.position == copy_.position


def test_two_changes_of_one_item_in_one_microsecond_have_different_positions() -> None:
    active = entitlement_change(event_id="e1", created=1772611200123456, old_status=None, new_status="Active")
    cancelled = entitlement_change(
        event_id="e2", created=1772611200123456, old_status="Active", new_status="Cancelled"
    )

    assert decode_kinesis(active).position != decode_kinesis(cancelled).position


def test_an_items_positions_sort_by_the_time_of_its_changes_not_by_kinesis_order() -> None:
    # The later change was put first: its Kinesis sequence number is the lower one.
    later = entitlement_change(
        event_id="e2", created=1772611200500000, old_status="Active", new_status="Cancelled"
    )
    earlier = entitlement_change(
        event_id="e1", created=1772611200400000, old_status=None, new_status="Active"
    )

    put_first = decode_kinesis(later, sequence_number="1000")
    put_second = decode_kinesis(earlier, sequence_number="2000")

    assert put_second.position.sequence_key < put_first.position.sequence_key


def test_every_position_sorts_after_every_dynamodb_stream_sequence_number() -> None:
    # A handover from the DynamoDB stream to Kinesis: an item's Kinesis changes come after its others.
    newest_streams_key = StreamPosition(
        stream_arn=STREAMS_ARN, shard_id=SHARD, sequence_number="9" * 40
    ).sequence_key
    earliest = entitlement_change(event_id="e1", created=10**14, old_status=None, new_status="Active")

    assert decode_kinesis(earliest).position.sequence_key > newest_streams_key


# -- refused records ------------------------------------------------------------------------------------


def _without(path: tuple[str, ...]) -> Any:
    def mutate(record: dict[str, Any]) -> None:
        target = record
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return mutate


def _setting(path: tuple[str, ...], value: Any) -> Any:
    def mutate(record: dict[str, Any]) -> None:
        target = record
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return mutate


BAD_RECORDS = {
    "another table": (_setting(("tableName",), "other-table"), "tableName names another table"),
    "no table": (_without(("tableName",)), "tableName is missing"),
    "unknown recordFormat": (_setting(("recordFormat",), "application/x-amz-ion"), "recordFormat"),
    "no recordFormat": (_without(("recordFormat",)), "recordFormat is missing"),
    "no dynamodb section": (_without(("dynamodb",)), "dynamodb section is missing"),
    "no time": (_without(("dynamodb", "ApproximateCreationDateTime")), "ApproximateCreationDateTime"),
    "a time in seconds as a float": (
        _setting(("dynamodb", "ApproximateCreationDateTime"), 1772611200.123),
        "ApproximateCreationDateTime is missing or not an integer",
    ),
    "a negative time": (
        _setting(("dynamodb", "ApproximateCreationDateTime"), -1),
        "ApproximateCreationDateTime is out of range",
    ),
    "a time beyond the year 5138": (
        _setting(("dynamodb", "ApproximateCreationDateTime"), 10**17),
        "ApproximateCreationDateTime is out of range",
    ),
    "no Keys": (_without(("dynamodb", "Keys")), "Keys is missing"),
    "no eventID": (_without(("eventID",)), "eventID"),
    "an unknown eventName": (_setting(("eventName",), "UPSERT"), "eventName"),
    "a SequenceNumber of the DynamoDB stream's": (
        _setting(("dynamodb", "SequenceNumber"), "49600000000000000000000000000000000001"),
        "mixes the DynamoDB stream's envelope and Kinesis's",
    ),
    "a StreamViewType of the DynamoDB stream's": (
        _setting(("dynamodb", "StreamViewType"), "NEW_AND_OLD_IMAGES"),
        "mixes the DynamoDB stream's envelope and Kinesis's",
    ),
    "a malformed image": (_setting(("dynamodb", "NewImage", "status"), {"S": 7}), "NewImage"),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_a_bad_kinesis_record_is_a_decode_error_naming_its_reason_and_no_data(case: str) -> None:
    mutate, reason = BAD_RECORDS[case]
    record = copy.deepcopy(kinesis_envelope(RECORDS["signup"]))
    mutate(record)

    with pytest.raises(DecodeError) as refused:
        decode_kinesis(record)

    assert reason in refused.value.reason
    for personal in (USER, ACCOUNT, "other-table", "processor-sandbox-1111"):
        assert personal not in str(refused.value)


def test_a_refused_kinesis_record_is_placed_at_its_kinesis_sequence_number() -> None:
    record = kinesis_envelope(RECORDS["signup"])
    record["tableName"] = "other-table"

    with pytest.raises(DecodeError) as refused:
        decode_kinesis(record, sequence_number=KINESIS_SEQUENCE)

    context = refused.value.context
    assert (context.shard_id, context.sequence_number) == (SHARD, KINESIS_SEQUENCE)
    assert context.event_id == RECORDS["signup"]["eventID"]


def test_a_kinesis_record_without_its_sequence_number_is_refused() -> None:
    with pytest.raises(DecodeError, match="sequence number it was read at"):
        decode_kinesis(kinesis_envelope(RECORDS["signup"]), sequence_number=None)


def test_a_kinesis_record_at_a_sequence_number_that_is_not_digits_is_refused() -> None:
    with pytest.raises(DecodeError, match="Kinesis sequence number is not"):
        decode_kinesis(kinesis_envelope(RECORDS["signup"]), sequence_number="seq-1")


def test_a_kinesis_record_is_refused_by_a_consumer_not_configured_for_kinesis() -> None:
    with pytest.raises(DecodeError, match="not configured for a Kinesis source"):
        decode_record(
            data(kinesis_envelope(RECORDS["signup"])),
            stream_arn=STREAMS_ARN,
            shard_id=SHARD,
            sequence_number="49600000000000000000000000000000000001",
        )


@pytest.mark.parametrize("name", ["signup", "unknown_item"])
def test_a_dynamodb_stream_record_is_refused_by_a_consumer_of_kinesis(name: str) -> None:
    # Both decoder branches: the typed one (signup) and the generic one (an unknown item).
    record = RECORDS[name]

    with pytest.raises(DecodeError, match="not a Kinesis record"):
        decode_kinesis(record, sequence_number=record["dynamodb"]["SequenceNumber"])


def test_a_kinesis_source_needs_the_tables_name() -> None:
    with pytest.raises(ValueError, match="table's name"):
        KinesisSource("")


# -- the precision setting ------------------------------------------------------------------------------


def test_a_precision_change_mid_stream_reads_each_record_in_its_own_unit() -> None:
    source = KinesisSource(TABLE)
    in_millis = entitlement_change(event_id="e1", created=1772611200123, old_status=None, new_status="Active")
    in_micros = entitlement_change(
        event_id="e2", created=1772611200124001, old_status="Active", new_status="Cancelled"
    )

    first = decode_kinesis(in_millis, source=source)
    second = decode_kinesis(in_micros, source=source)

    assert second.created_at - first.created_at == datetime(2026, 1, 1, 0, 0, 0, 1001) - datetime(2026, 1, 1)


def test_a_precision_change_mid_stream_is_counted_once_per_change() -> None:
    source = KinesisSource(TABLE)
    times = [1772611200123, 1772611200124, 1772611200125000, 1772611200126000, 1772611200127]

    for index, created in enumerate(times):
        decode_kinesis(
            entitlement_change(event_id=f"e{index}", created=created, old_status=None, new_status="Active"),
            source=source,
        )

    assert source.precision_changes == 2


def test_a_precision_is_remembered_per_shard() -> None:
    source = KinesisSource(TABLE)
    in_millis = entitlement_change(event_id="e1", created=1772611200123, old_status=None, new_status="Active")
    in_micros = entitlement_change(
        event_id="e2", created=1772611200124000, old_status=None, new_status="Active"
    )

    decode_kinesis(in_millis, source=source, shard_id="shardId-000000000001")
    decode_kinesis(in_micros, source=source, shard_id="shardId-000000000002")

    assert source.precision_changes == 0


def test_a_precision_change_is_said_with_the_shard_and_units_and_no_data(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = KinesisSource(TABLE)
    decode_kinesis(
        entitlement_change(event_id="e1", created=1772611200123, old_status=None, new_status="Active"),
        source=source,
    )

    with caplog.at_level(logging.WARNING, logger="pipeline._kinesis_envelope"):
        decode_kinesis(
            entitlement_change(event_id="e2", created=1772611200124000, old_status=None, new_status="Active"),
            source=source,
        )

    (said,) = caplog.records
    assert "precision changed" in said.getMessage()
    assert (said.shard, said.from_precision, said.to_precision) == (SHARD, "MILLISECOND", "MICROSECOND")  # type: ignore[attr-defined]
    assert "u-1" not in said.getMessage() and "acc-1" not in said.getMessage()

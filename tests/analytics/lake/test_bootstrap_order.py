"""Where an exported item sorts among the stream's changes, and when the stream covers the export
(analytics.bootstrap: read_export_order, ExportOrder, check_coverage)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from analytics.bootstrap import SMALL_LIMIT, BootstrapRefused, StreamGap, check_coverage, read_export_order
from config import BootstrapSettings

T = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/2026-11-30T00:00:00.000"
FIRST = 1100000000017454423009


def _record(number: int, at: datetime, pk: str = "USER#u1", sk: str = "ENTITLEMENT#a1") -> dict[str, Any]:
    return {
        "dynamodb": {
            "SequenceNumber": str(number),
            "ApproximateCreationDateTime": at,
            "Keys": {"pk": {"S": pk}, "sk": {"S": sk}},
        }
    }


class _Stream:
    """One shard holding `records`, served a page of two at a time, then an empty page at its end."""

    def __init__(self, records: list[dict[str, Any]], created: datetime | None = None) -> None:
        self.records = records
        self.created = created or T - timedelta(hours=1)
        self.pages = 0

    def describe_stream(self, **kwargs: Any) -> dict[str, Any]:
        return {
            "StreamDescription": {"CreationRequestDateTime": self.created, "Shards": [{"ShardId": "s-1"}]}
        }

    def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
        assert kwargs["ShardIteratorType"] == "TRIM_HORIZON"
        return {"ShardIterator": "0"}

    def get_records(self, **kwargs: Any) -> dict[str, Any]:
        self.pages += 1
        start = int(kwargs["ShardIterator"])
        return {"Records": self.records[start : start + 2], "NextShardIterator": str(start + 2)}


def _order(records: list[dict[str, Any]], precision: float = 1.0) -> Any:
    order, _ = read_export_order(
        _Stream(records), STREAM, exported_at=T, precision=timedelta(seconds=precision)
    )
    return order


def test_an_item_changed_before_t_sorts_just_after_its_last_such_change() -> None:
    order = _order([_record(FIRST, T - timedelta(minutes=5)), _record(FIRST + 4, T - timedelta(minutes=1))])
    assert order.sequence_for(("USER#u1", "ENTITLEMENT#a1"), 0, 0) == str(FIRST + 5)


def test_a_change_within_the_precision_of_t_goes_to_the_stream() -> None:
    order = _order(
        [_record(FIRST, T - timedelta(seconds=5)), _record(FIRST + 1, T - timedelta(milliseconds=500))]
    )
    # The change half a second before T is not "before T": the exported row sorts below it.
    assert order.sequence_for(("USER#u1", "ENTITLEMENT#a1"), 0, 0) == str(FIRST + 1)


def test_a_change_after_t_is_not_read_as_before_it() -> None:
    stream = _Stream([_record(FIRST + n, T + timedelta(seconds=n)) for n in range(10)])
    order, _ = read_export_order(stream, STREAM, exported_at=T, precision=timedelta(seconds=1))
    assert order.last_before == {}
    assert stream.pages == 1  # the read stops at the first change at or after T


def test_an_item_without_changes_before_t_sorts_below_every_stream_change() -> None:
    order = _order([_record(FIRST, T - timedelta(minutes=5), pk="USER#other")])
    numbers = {
        order.sequence_for(("USER#u1", "ENTITLEMENT#a1"), f, line) for f in range(3) for line in range(3)
    }
    assert len(numbers) == 9  # unique to (file, line)
    assert all(int(n) < SMALL_LIMIT <= FIRST for n in numbers)


def test_two_items_never_get_the_same_number() -> None:
    order = _order(
        [
            _record(FIRST, T - timedelta(minutes=3), pk="USER#a"),
            _record(FIRST + 1, T - timedelta(minutes=2), pk="USER#b"),
        ]
    )
    assert order.sequence_for(("USER#a", "ENTITLEMENT#a1"), 0, 0) != order.sequence_for(
        ("USER#b", "ENTITLEMENT#a1"), 0, 1
    )


def test_sequence_numbers_shorter_than_dynamodbs_are_refused() -> None:
    with pytest.raises(BootstrapRefused):
        _order([_record(12345, T - timedelta(minutes=5))])


def _coverage(created: datetime | None, now: datetime, *, accept: bool = False) -> timedelta | None:
    told: list[str] = []
    gap = check_coverage(
        created,
        exported_at=T,
        now=now,
        settings=BootstrapSettings(margin_seconds=300, stream_retention_hours=24),
        accept_gap=accept,
        progress=told.append,
    )
    if gap is not None:
        assert told and "cannot be covered" in told[0]
    return gap


def test_a_stream_made_before_t_and_a_horizon_well_before_it_cover_the_export() -> None:
    assert _coverage(T - timedelta(seconds=1), T + timedelta(hours=1)) is None


def test_a_horizon_past_t_minus_the_margin_is_a_gap_said_by_how_much() -> None:
    with pytest.raises(StreamGap) as stopped:
        _coverage(T - timedelta(days=30), T + timedelta(hours=24))
    assert stopped.value.gap == timedelta(minutes=5)
    assert "0h05m00s" in str(stopped.value)


def test_a_stream_made_after_t_is_a_gap() -> None:
    with pytest.raises(StreamGap) as stopped:
        _coverage(T + timedelta(minutes=2), T + timedelta(hours=1))
    assert stopped.value.gap == timedelta(minutes=2)


def test_an_accepted_gap_is_said_and_returned() -> None:
    assert _coverage(T + timedelta(minutes=2), T + timedelta(hours=1), accept=True) == timedelta(minutes=2)

"""The switch-over's handover filter (`pipeline.handover.Handover`): which changes each consumer hands on,
what it counts and writes, and the handover times it refuses.

The DynamoDB stream's events are decoded from the adapter's records (ApproximateCreationDateTime in
milliseconds, whole seconds as AWS gives them), the Kinesis ones from Kinesis records of the same change
(microseconds); each pair's first member is a name standing for the raw record.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline.decode import decode_record
from pipeline.events import StreamEvent
from pipeline.handover import Handover
from pipeline.item_order import ItemOrder
from tests.pipeline._kinesis_records import (
    SHARD,
    STREAMS_ARN,
    adapter_records,
    data,
    decode_kinesis,
    entitlement_change,
    kinesis_envelope,
)

H = datetime(2026, 3, 4, 8, 0, 0, tzinfo=UTC)
H_MICROS = int(H.timestamp()) * 1_000_000
Pair = tuple[str, StreamEvent]


def kinesis_change(name: str, micros: int, *, old: str | None = None, new: str | None = "Active") -> Pair:
    record = entitlement_change(
        event_id=f"id-{name}", created=micros, old_status=old, new_status=new, user=f"u-{name}"
    )
    return name, decode_kinesis(record)


def both_sources(micros: int) -> tuple[StreamEvent, StreamEvent]:
    """One change as each source gives it: the DynamoDB stream's time rounded down to the second (as AWS
    writes it, in milliseconds through the adapter), Kinesis's in microseconds."""
    signup = adapter_records()["signup"]
    streams_record = copy.deepcopy(signup)
    streams_record["dynamodb"]["ApproximateCreationDateTime"] = micros // 1_000_000 * 1000
    streams = decode_record(
        data(streams_record),
        stream_arn=STREAMS_ARN,
        shard_id="shardId-1",
        sequence_number=streams_record["dynamodb"]["SequenceNumber"],
    )
    kinesis_record = kinesis_envelope(signup)
    kinesis_record["dynamodb"]["ApproximateCreationDateTime"] = micros
    return streams, decode_kinesis(kinesis_record)


def names(pairs: list[Pair]) -> list[str]:
    return [name for name, _ in pairs]


def test_the_streams_consumer_hands_on_only_the_changes_created_before_the_handover() -> None:
    handover = Handover(at=H, keep="before")
    read = [
        kinesis_change("early", H_MICROS - 1),
        kinesis_change("at", H_MICROS),
        kinesis_change("late", H_MICROS + 5),
        kinesis_change("earlier", H_MICROS - 2_000_000),
    ]

    assert names(handover.resolve(read)) == ["early", "earlier"]


def test_the_kinesis_consumer_hands_on_only_the_changes_at_or_after_the_handover() -> None:
    handover = Handover(at=H, keep="from")
    read = [
        kinesis_change("early", H_MICROS - 1),
        kinesis_change("at", H_MICROS),
        kinesis_change("late", H_MICROS + 5),
    ]

    assert names(handover.resolve(read)) == ["at", "late"]


@pytest.mark.parametrize(
    "offset_micros", [-1_000_001, -1_000_000, -999_999, -1, 0, 1, 999, 999_999, 1_000_000]
)
def test_each_change_is_handed_on_by_exactly_one_of_the_two_consumers(offset_micros: int) -> None:
    # The DynamoDB stream's time is Kinesis's rounded down to the second: both must judge alike.
    streams_event, kinesis_event = both_sources(H_MICROS + offset_micros)
    streams_side = Handover(at=H, keep="before")
    kinesis_side = Handover(at=H, keep="from")

    handed = len(streams_side.resolve([("streams", streams_event)])) + len(
        kinesis_side.resolve([("kinesis", kinesis_event)])
    )

    assert handed == 1


def test_the_skipped_and_the_handed_changes_are_counted_per_shard() -> None:
    handover = Handover(at=H, keep="from")
    handover.resolve([kinesis_change("a", H_MICROS - 10), kinesis_change("b", H_MICROS - 5)])
    handover.resolve([kinesis_change("c", H_MICROS - 1), kinesis_change("d", H_MICROS + 1)])

    stats = handover.stats[SHARD]
    assert (stats.skipped, stats.handed) == (3, 1)


def test_the_kinesis_duplicates_are_dropped_before_the_handover_judges_them() -> None:
    handover = Handover(at=H, keep="from", inner=ItemOrder())
    first = kinesis_change("first", H_MICROS + 1)
    copy_of_it = ("copy", first[1])

    assert names(handover.resolve([first, copy_of_it])) == ["first"]
    assert handover.stats[SHARD].handed == 1


def test_a_shard_is_past_the_handover_once_it_gave_a_change_at_or_after_it() -> None:
    handover = Handover(at=H, keep="before")
    handover.resolve([kinesis_change("before", H_MICROS - 1)])
    before = handover.past_handover(SHARD)
    handover.resolve([kinesis_change("at", H_MICROS)])

    assert (before, handover.past_handover(SHARD)) == (False, True)


def test_an_empty_read_changes_no_figure_and_writes_no_file(tmp_path: Path) -> None:
    handover = Handover(at=H, keep="before", stats_dir=tmp_path / "handover")

    assert handover.resolve([]) == []
    assert handover.stats == {}
    assert not (tmp_path / "handover").exists()


def test_the_shard_figures_are_written_with_counts_and_times_only(tmp_path: Path) -> None:
    now = datetime(2026, 3, 4, 8, 0, 30, tzinfo=UTC)
    handover = Handover(at=H, keep="before", stats_dir=tmp_path, wall_clock=lambda: now)
    handover.resolve([kinesis_change("a", H_MICROS - 1), kinesis_change("b", H_MICROS + 3)])

    written: dict[str, Any] = json.loads((tmp_path / f"{SHARD}.json").read_text())
    assert written == {
        "shard_id": SHARD,
        "handover_at": "2026-03-04T08:00:00+00:00",
        "keeps": "before",
        "handed": 1,
        "skipped": 1,
        "newest_seen": (H + timedelta(microseconds=3)).isoformat(),
        "past_handover": True,
        "updated_at": now.isoformat(),
    }


def test_a_restarted_consumer_carries_on_from_the_shards_written_figures(tmp_path: Path) -> None:
    # The first run skipped a change before H and checkpointed past it; the run after a kill reads on.
    Handover(at=H, keep="from", stats_dir=tmp_path).resolve([kinesis_change("a", H_MICROS - 1)])
    restarted = Handover(at=H, keep="from", stats_dir=tmp_path)
    restarted.resolve([kinesis_change("b", H_MICROS + 1)])

    written = json.loads((tmp_path / f"{SHARD}.json").read_text())
    assert (written["skipped"], written["handed"]) == (1, 1)


def test_the_figures_of_another_handover_time_are_not_carried_on(tmp_path: Path) -> None:
    Handover(at=H, keep="from", stats_dir=tmp_path).resolve([kinesis_change("a", H_MICROS - 1)])
    later = Handover(at=H + timedelta(hours=1), keep="from", stats_dir=tmp_path)
    later.resolve([kinesis_change("b", H_MICROS + 1)])

    assert (later.stats[SHARD].skipped, later.stats[SHARD].handed) == (1, 0)


def test_a_handover_time_with_a_fraction_of_a_second_is_refused() -> None:
    with pytest.raises(ValueError, match="whole second"):
        Handover(at=H + timedelta(milliseconds=500), keep="before")


def test_a_handover_time_without_a_time_zone_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        Handover(at=H.replace(tzinfo=None), keep="from")

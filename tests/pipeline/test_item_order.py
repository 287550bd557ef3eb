"""Per-item duplicates and order for a Kinesis shard (`pipeline.item_order.ItemOrder`): what the handlers
get from one read, and the position keys the lake orders an item's rows by.

The events are decoded from Kinesis records (tests/pipeline/_kinesis_records.py), each pair's first
member a name standing for the raw record.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from analytics.lake import LakeHandler, open_lake
from analytics.lake.views import connect
from config import LakeSettings
from pipeline.events import StreamEvent
from pipeline.item_order import ItemOrder
from schema.table import EntitlementRow
from tests.pipeline._kinesis_records import decode_kinesis, entitlement_change

T0 = 1772611200000000  # microseconds
Pair = tuple[str, StreamEvent]


def change(
    name: str,
    created: int,
    old: str | None,
    new: str | None,
    *,
    user: str = "u-1",
    event_id: str | None = None,
    sequence: str = "1",
) -> Pair:
    record = entitlement_change(
        event_id=event_id or f"id-{name}", created=created, old_status=old, new_status=new, user=user
    )
    return name, decode_kinesis(record, sequence_number=sequence)


def names(pairs: list[Pair]) -> list[str]:
    return [name for name, _ in pairs]


def current_state(*reads: list[Pair]) -> str | None:
    """What the lake's `current_items` keeps for the item: the image of its row with the highest key."""
    last = max((event for read in reads for _, event in read), key=lambda event: event.position.sequence_key)
    return last.new_item.status if isinstance(last.new_item, EntitlementRow) else None


# -- duplicates -----------------------------------------------------------------------------------------


def test_a_record_with_an_event_id_already_seen_is_dropped_and_the_first_kept() -> None:
    # Only the eventID repeats: the rule holds on its own.
    order = ItemOrder()
    first = change("first", T0, None, "Active", event_id="e1")
    same_id = change("same-id", T0 + 1, "Active", "Cancelled", event_id="e1")

    assert names(order.resolve([first, same_id])) == ["first"]
    assert order.duplicates == 1


def test_a_copy_of_the_same_change_under_another_event_id_is_dropped() -> None:
    order = ItemOrder()

    kept = order.resolve(
        [change("a", T0, None, "Active", event_id="e1"), change("b", T0, None, "Active", event_id="e2")]
    )

    assert names(kept) == ["a"]


def test_a_copy_arriving_a_read_later_within_the_memory_is_dropped() -> None:
    order = ItemOrder(memory=10)
    order.resolve([change("a", T0, None, "Active")])

    assert order.resolve(
        [change("b", T0 + 5, "Active", "Cancelled"), change("a-again", T0, None, "Active")]
    ) == [change("b", T0 + 5, "Active", "Cancelled")]
    assert order.duplicates == 1


def test_a_copy_arriving_after_the_memory_forgot_the_first_is_handed_again() -> None:
    # The limit the memory sets; the lake still lands such a copy once (its position is the first's).
    order = ItemOrder(memory=1)
    order.resolve([change("a", T0, None, "Active")])
    order.resolve([change("other", T0, None, "Active", user="u-2")])

    assert names(order.resolve([change("a-again", T0, None, "Active")])) == ["a-again"]


def test_two_different_changes_are_not_duplicates() -> None:
    order = ItemOrder()

    kept = order.resolve([change("a", T0, None, "Active"), change("b", T0 + 1, "Active", "Cancelled")])

    assert names(kept) == ["a", "b"]
    assert order.duplicates == 0


def test_the_memory_must_hold_at_least_one_change() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ItemOrder(memory=0)


# -- order within an item -------------------------------------------------------------------------------


def test_an_items_changes_out_of_order_in_a_read_are_handed_in_time_order() -> None:
    later = change("cancel", T0 + 2000, "Active", "Cancelled")
    earlier = change("signup", T0, None, "Active")

    assert names(ItemOrder().resolve([later, earlier])) == ["signup", "cancel"]


def test_two_changes_of_an_item_in_one_microsecond_are_ordered_by_the_image_chain() -> None:
    # Arrival order says Cancelled -> Active first; the chain says Active -> Cancelled comes second.
    reactivate = change("reactivate", T0, "Cancelled", "Active")
    cancel = change("cancel", T0, "Active", "Cancelled")
    signup = change("signup", T0 - 10, None, "Active")

    assert names(ItemOrder().resolve([signup, reactivate, cancel])) == ["signup", "cancel", "reactivate"]


def test_a_remove_and_an_insert_in_one_microsecond_chain_through_the_absent_item() -> None:
    insert = change("insert", T0, None, "Active")
    remove = change("remove", T0, "Cancelled", None)
    before = change("before", T0 - 10, "Active", "Cancelled")

    assert names(ItemOrder().resolve([before, insert, remove])) == ["before", "remove", "insert"]


def test_a_tie_no_chain_orders_is_kept_in_arrival_order_and_counted() -> None:
    # Active -> Cancelled and Cancelled -> Active in one microsecond: either order fits.
    order = ItemOrder()
    first = change("first", T0, "Active", "Cancelled")
    second = change("second", T0, "Cancelled", "Active")

    assert names(order.resolve([first, second])) == ["first", "second"]
    assert order.ties == 2


def test_a_tie_no_chain_orders_is_said_with_the_shard_and_count_and_no_data(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="pipeline.item_order"):
        ItemOrder().resolve(
            [change("first", T0, "Active", "Cancelled"), change("second", T0, "Cancelled", "Active")]
        )

    (said,) = caplog.records
    assert "could not be ordered" in said.getMessage()
    assert (said.shard, said.changes) == ("shardId-000000000003", 2)  # type: ignore[attr-defined]
    assert all("u-1" not in str(value) for value in vars(said).values())


def test_an_ordered_tie_takes_its_keys_in_the_order_handed_so_the_lake_keeps_the_last() -> None:
    signup = change("signup", T0 - 10, None, "Active")
    cancel = change("cancel", T0, "Active", "Cancelled")
    reactivate = change("reactivate", T0, "Cancelled", "Active")
    given = {event.position.sequence_number for _, event in (cancel, reactivate)}

    for arrival in ([signup, cancel, reactivate], [signup, reactivate, cancel]):
        handed = ItemOrder().resolve(arrival)

        keys = [event.position.sequence_key for _, event in handed]
        assert keys == sorted(keys)
        assert {event.position.sequence_number for _, event in handed[1:]} == given
        assert current_state(handed) == "Active"


def test_a_change_handed_a_read_after_a_later_one_of_its_item_is_counted_late() -> None:
    order = ItemOrder()
    order.resolve([change("cancel", T0 + 2000, "Active", "Cancelled")])

    late = order.resolve([change("signup", T0, None, "Active")])

    assert names(late) == ["signup"]
    assert order.late == 1


def test_a_change_handed_late_still_sorts_before_its_items_later_change_in_the_lake() -> None:
    order = ItemOrder()
    first_read = order.resolve([change("cancel", T0 + 2000, "Active", "Cancelled")])
    second_read = order.resolve([change("signup", T0, None, "Active")])

    assert current_state(first_read, second_read) == "Cancelled"


# -- items are independent ------------------------------------------------------------------------------


def test_other_items_keep_their_slots_while_one_items_changes_trade_places() -> None:
    read = [
        change("u1-cancel", T0 + 2000, "Active", "Cancelled", user="u-1"),
        change("u2-signup", T0 + 5000, None, "Active", user="u-2"),
        change("u1-signup", T0, None, "Active", user="u-1"),
        change("u3-signup", T0 + 1, None, "Active", user="u-3"),
    ]

    assert names(ItemOrder().resolve(read)) == ["u1-signup", "u2-signup", "u1-cancel", "u3-signup"]


def test_the_same_change_of_two_items_is_no_duplicate() -> None:
    read = [change("u1", T0, None, "Active", user="u-1"), change("u2", T0, None, "Active", user="u-2")]

    assert names(ItemOrder().resolve(read)) == ["u1", "u2"]


def test_a_tie_of_one_item_leaves_another_items_changes_in_the_same_microsecond_alone() -> None:
    order = ItemOrder()
    read = [
        change("u1-first", T0, "Active", "Cancelled", user="u-1"),
        change("u2", T0, None, "Active", user="u-2"),
        change("u1-second", T0, "Cancelled", "Active", user="u-1"),
    ]

    assert names(order.resolve(read)) == ["u1-first", "u2", "u1-second"]
    assert order.ties == 2


def test_a_tie_a_read_after_its_items_last_change_is_ordered_from_the_state_it_left() -> None:
    order = ItemOrder()
    order.resolve([change("signup", T0 - 10, None, "Active")])

    handed = order.resolve(
        [change("reactivate", T0, "Cancelled", "Active"), change("cancel", T0, "Active", "Cancelled")]
    )

    assert names(handed) == ["cancel", "reactivate"]
    assert order.ties == 0


def test_a_tie_that_cannot_start_from_the_state_before_is_judged_by_its_own_chain() -> None:
    # The change between (Active -> Suspended) is lost or late: the chain of the two alone decides.
    signup = change("signup", T0 - 10, None, "Active")
    resume = change("resume", T0, "Suspended", "Cancelled")
    cancel = change("cancel", T0, "Cancelled", "Removed")

    assert names(ItemOrder().resolve([signup, cancel, resume])) == ["signup", "resume", "cancel"]


# -- what an operator sees ------------------------------------------------------------------------------


def _counted(resolution: str) -> float:
    labels = {"resolution": resolution}
    return REGISTRY.get_sample_value("entitlements_consumer_item_order_changes_total", labels) or 0.0


def test_an_unorderable_tie_is_counted_in_the_consumers_metric() -> None:
    before = _counted("tie")

    ItemOrder().resolve(
        [change("first", T0, "Active", "Cancelled"), change("second", T0, "Cancelled", "Active")]
    )

    assert _counted("tie") - before == 2


def test_dropped_copies_and_late_changes_are_counted_in_the_consumers_metric() -> None:
    order = ItemOrder()
    before = (_counted("duplicate"), _counted("late"))

    order.resolve(
        [
            change("cancel", T0 + 2000, "Active", "Cancelled"),
            change("cancel-again", T0 + 2000, "Active", "Cancelled"),
        ]
    )
    order.resolve([change("signup", T0, None, "Active")])

    assert (_counted("duplicate") - before[0], _counted("late") - before[1]) == (1, 1)


# -- the lake -------------------------------------------------------------------------------------------


def test_a_reordered_duplicated_feed_lands_one_row_per_change_and_the_lake_keeps_the_last(
    tmp_path: Path,
) -> None:
    # The Kinesis order: the cancellation first, the signup after it, a copy of the cancellation in the
    # next read (at another Kinesis sequence number), which a restarted process no longer remembers.
    cancel = entitlement_change(event_id="e2", created=T0 + 2000, old_status="Active", new_status="Cancelled")
    signup = entitlement_change(event_id="e1", created=T0, old_status=None, new_status="Active")
    lake = open_lake(str(tmp_path / "lake"))
    for reads in (
        [[("1", cancel), ("2", signup)]],
        [[("3", cancel)]],  # a new process: the copy reaches the lake again
    ):
        order, handler = ItemOrder(), LakeHandler(lake, LakeSettings())
        for read in reads:
            pairs = [(number, decode_kinesis(record, sequence_number=number)) for number, record in read]
            for _, event in order.resolve(pairs):
                handler.add(event)
        handler.flush()

    con = connect(lake)
    try:
        versions = con.sql("SELECT change_kind, status FROM item_versions ORDER BY sequence_key").fetchall()
        current = con.sql("SELECT status FROM current_items").fetchall()
    finally:
        con.close()
    assert versions == [("INSERT", "Active"), ("MODIFY", "Cancelled")]
    assert current == [("Cancelled",)]

"""schema/table.py: the item shapes (frozen msgspec Structs) and `parse_item`, which types an image by its
own sort key and never raises."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec
import pytest

from schema.table import (
    GUARD_SK,
    CleanupKind,
    CleanupRecord,
    EntitlementRow,
    EntitlementStatus,
    GuardItem,
    IdempotencyRecord,
    ItemKind,
    UnknownItem,
    cancellation_key,
    entitlement_key,
    idempotency_key,
    item_class,
    item_kind,
    parse_item,
    stale_key,
)


def row_image(**changes: Any) -> dict[str, Any]:
    image: dict[str, Any] = {
        **entitlement_key("u1", "acc-1"),
        "userId": "u1",
        "arrayAccountId": "acc-1",
        "status": "Active",
    }
    image.update(changes)
    return image


def cleanup_image(**changes: Any) -> dict[str, Any]:
    image: dict[str, Any] = {**stale_key("u1", "acc-1"), "userId": "u1", "arrayAccountId": "acc-1"}
    image.update(changes)
    return image


def test_an_entitlement_image_is_an_entitlement_row() -> None:
    item = parse_item(row_image(createdAt="2026-01-01T00:00:00Z"))

    assert item == EntitlementRow(
        pk="USER#u1", sk="ENTITLEMENT#acc-1", userId="u1", arrayAccountId="acc-1", status="Active",
        createdAt="2026-01-01T00:00:00Z",
    )  # fmt: skip
    assert item.known_status is EntitlementStatus.ACTIVE


@pytest.mark.parametrize(
    ("key", "kind"),
    [(stale_key("u1", "acc-1"), CleanupKind.STALE), (cancellation_key("u1"), CleanupKind.CANCELLATION)],
)
def test_a_cleanup_image_is_a_cleanup_record_of_its_sort_keys_kind(
    key: dict[str, str], kind: CleanupKind
) -> None:
    item = parse_item(cleanup_image(**key, ttl=1_772_697_600))

    assert isinstance(item, CleanupRecord)
    assert item.cleanup_kind is kind
    assert item.ttl_epoch_seconds == 1_772_697_600


def test_an_unknown_status_is_kept_as_text() -> None:
    item = parse_item(row_image(status="Paused"))

    assert isinstance(item, EntitlementRow)
    assert item.status == "Paused"
    assert item.known_status is None


def test_attributes_the_class_does_not_declare_are_kept_in_extra() -> None:
    item = parse_item(row_image(referral={"code": "XY"}, kind="premium", extra=frozenset({"a"})))

    assert isinstance(item, EntitlementRow)
    assert item.kind is ItemKind.ENTITLEMENT
    assert item.extra == {"referral": {"code": "XY"}, "kind": "premium", "extra": frozenset({"a"})}
    assert item.attributes()["referral"] == {"code": "XY"}
    assert item.attributes()["status"] == "Active"


@pytest.mark.parametrize(
    "image",
    [
        row_image(status=None),  # a NULL where text is required
        row_image(status=2),
        row_image(userId=True),
        {k: v for k, v in row_image().items() if k != "arrayAccountId"},
        cleanup_image(ttl=True),  # a BOOL is no ttl
        cleanup_image(createdAt=b"x"),
    ],
    ids=["null status", "number status", "bool user", "no account", "bool ttl", "bytes createdAt"],
)
def test_a_known_key_whose_image_does_not_fit_is_an_unknown_item_kept_whole(image: dict[str, Any]) -> None:
    item = parse_item(image)

    assert isinstance(item, UnknownItem)
    assert (item.pk, item.sk) == (image["pk"], image["sk"])
    assert {"pk": item.pk, "sk": item.sk, **item.extra} == image


def test_a_null_optional_attribute_reads_as_absent() -> None:
    item = parse_item(row_image(createdAt=None))

    assert isinstance(item, EntitlementRow)
    assert item.createdAt is None


@pytest.mark.parametrize(
    ("ttl", "seconds"),
    [(Decimal("1772697600"), 1_772_697_600), (Decimal("1772697600.5"), None), ("1772697600", None)],
)
def test_only_an_integral_number_is_a_ttl_dynamodb_acts_on(ttl: Any, seconds: int | None) -> None:
    item = parse_item(cleanup_image(ttl=ttl))

    assert isinstance(item, CleanupRecord)
    assert item.ttl == ttl
    assert item.ttl_epoch_seconds == seconds


def test_an_unknown_sort_key_is_an_unknown_item() -> None:
    assert isinstance(parse_item({"pk": "X", "sk": "PROFILE", "name": "n"}), UnknownItem)
    assert item_class(ItemKind.UNKNOWN) is None


def test_items_are_frozen_and_copied_with_replace() -> None:
    item = parse_item(row_image())
    assert isinstance(item, EntitlementRow)

    with pytest.raises(AttributeError):
        item.status = "Cancelled"  # type: ignore[misc]
    cancelled = msgspec.structs.replace(item, status="Cancelled")

    assert (item.status, cancelled.status) == ("Active", "Cancelled")


def test_the_guard_and_idempotency_records_are_kinds_of_their_own_typed_by_their_sort_key() -> None:
    guard = parse_item({"pk": "USER#u1", "sk": "#GUARD", "userId": "u1", "version": 3})
    record = parse_item(
        {
            "pk": "USER#u1",
            "sk": "IDEMPOTENCY#d1",
            "userId": "u1",
            "requestDigest": "r",
            "responseStatus": 201,
            "responseBody": "{}",
            "ttl": 1_800_000_000,
        }
    )
    assert (type(guard), guard.kind) == (GuardItem, ItemKind.GUARD)
    assert (type(record), record.kind) == (IdempotencyRecord, ItemKind.IDEMPOTENCY)
    assert item_kind(GUARD_SK) is ItemKind.GUARD
    assert item_kind(idempotency_key("u1", "d1")["sk"]) is ItemKind.IDEMPOTENCY

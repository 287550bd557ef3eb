"""The entitlements table's item shapes: keys, item kinds, statuses and typed items.

This is the contract everything else keys on. See docs/table.md for the reasoning behind each choice.

Items are frozen msgspec Structs read from plain Python values (a decoded DynamoDB image: str, int,
Decimal, bytes, sets, lists, dicts) by `parse_item`. Parsing never fails on an unknown attribute or an
unknown status: those are kept (`extra`) and reported, so a change in the service never crashes a reader.
"""

from __future__ import annotations

__all__ = [
    "CANCELLATION_SK",
    "ENTITLEMENT_SK_PREFIX",
    "GSI1_NAME",
    "GSI1_PK_PREFIX",
    "ITEM_FIELDS",
    "STALE_SK_PREFIX",
    "USER_PK_PREFIX",
    "CleanupKind",
    "CleanupRecord",
    "EntitlementRow",
    "EntitlementStatus",
    "Item",
    "ItemKind",
    "UnknownItem",
    "cancellation_key",
    "entitlement_key",
    "gsi1_key",
    "item_kind",
    "parse_item",
    "stale_key",
    "user_pk",
]

import types
import typing
from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal

import msgspec
from msgspec import Struct

USER_PK_PREFIX = "USER#"
ENTITLEMENT_SK_PREFIX = "ENTITLEMENT#"
CANCELLATION_SK = "CLEANUP#CANCELLATION"
STALE_SK_PREFIX = "CLEANUP#STALE#"
GSI1_NAME = "GSI1"
GSI1_PK_PREFIX = "ARRAY#"
GSI1_SK_VALUE = "ENTITLEMENT"

PK = "pk"
SK = "sk"
TTL_ATTRIBUTE = "ttl"


class EntitlementStatus(StrEnum):
    """The statuses an entitlement row can hold (docs/table.md derives them from the seed)."""

    ACTIVE = "Active"
    SUPERSEDED = "Superseded"  # retired in favour of a newer Array account
    CANCELLED = "Cancelled"  # the user cancelled; a cancellation record schedules cleanup
    REMOVED = "Removed"  # the Array account was deleted by cleanup


class ItemKind(StrEnum):
    ENTITLEMENT = "entitlement"
    CANCELLATION = "cancellation"
    STALE = "stale"
    UNKNOWN = "unknown"


# Enum member lookups cost ~70 ns each on Python 3.11: `item_kind` runs once per stream record, so it
# returns these module-level references to the same members.
_ENTITLEMENT_KIND = ItemKind.ENTITLEMENT
_CANCELLATION_KIND = ItemKind.CANCELLATION
_STALE_KIND = ItemKind.STALE
_UNKNOWN_KIND = ItemKind.UNKNOWN


class CleanupKind(StrEnum):
    CANCELLATION = "cancellation"
    STALE = "stale"


def user_pk(user_id: str) -> str:
    return f"{USER_PK_PREFIX}{user_id}"


def entitlement_key(user_id: str, array_account_id: str) -> dict[str, str]:
    return {PK: user_pk(user_id), SK: f"{ENTITLEMENT_SK_PREFIX}{array_account_id}"}


def cancellation_key(user_id: str) -> dict[str, str]:
    """One key per user: a reactivation deletes exactly this item."""
    return {PK: user_pk(user_id), SK: CANCELLATION_SK}


def stale_key(user_id: str, array_account_id: str) -> dict[str, str]:
    """Ends in the Array account id, off the cancellation key, so nothing cancels it."""
    return {PK: user_pk(user_id), SK: f"{STALE_SK_PREFIX}{array_account_id}"}


def gsi1_key(array_account_id: str) -> dict[str, str]:
    return {"gsi1pk": f"{GSI1_PK_PREFIX}{array_account_id}", "gsi1sk": GSI1_SK_VALUE}


def item_kind(sort_key: object) -> ItemKind:
    """The kind of an item, read from its sort key alone (keys are present in every stream record)."""
    if not isinstance(sort_key, str):
        return _UNKNOWN_KIND
    if sort_key.startswith(ENTITLEMENT_SK_PREFIX):
        return _ENTITLEMENT_KIND
    if sort_key == CANCELLATION_SK:
        return _CANCELLATION_KIND
    if sort_key.startswith(STALE_SK_PREFIX):
        return _STALE_KIND
    return _UNKNOWN_KIND


# -- items ----------------------------------------------------------------------------------------------
#
# The ONE statement of the item shapes. Each is a frozen msgspec Struct: the declared attributes as
# fields, every other attribute of the image kept whole in `extra` (name -> decoded value), so a new
# attribute never fails a reader. `pipeline.decode` derives the stream's wire shape from these fields
# and `parse_item` checks an image against them; neither restates them.


class _ItemBase(Struct, frozen=True, kw_only=True, gc=False):
    extra: dict[str, Any] = {}

    @property
    def extra_attributes(self) -> dict[str, Any]:
        return dict(self.extra)

    def attributes(self) -> dict[str, Any]:
        """The item's attributes by name: every declared field (None where absent) and every extra."""
        out = {name: getattr(self, name) for name in _ATTRIBUTE_FIELDS[type(self)]}
        out.update(self.extra)
        return out


class EntitlementRow(_ItemBase, frozen=True, kw_only=True, gc=False):
    """A link from a user to one Array account. Never deleted, except by an erasure."""

    kind: Literal[ItemKind.ENTITLEMENT] = ItemKind.ENTITLEMENT
    pk: str
    sk: str
    userId: str
    arrayAccountId: str
    # Kept as text: an unknown status must not fail parsing. `known_status` says whether it is known.
    status: str
    createdAt: str | None = None
    updatedAt: str | None = None
    processorToken: str | None = None
    gsi1pk: str | None = None
    gsi1sk: str | None = None

    @property
    def known_status(self) -> EntitlementStatus | None:
        try:
            return EntitlementStatus(self.status)
        except ValueError:
            return None


class CleanupRecord(_ItemBase, frozen=True, kw_only=True, gc=False):
    """Carries the TTL that schedules an Array account for deletion."""

    kind: Literal[ItemKind.CANCELLATION, ItemKind.STALE]
    pk: str
    sk: str
    userId: str
    arrayAccountId: str
    # A Number of epoch seconds when well formed; a string or milliseconds are faults DynamoDB ignores,
    # kept as they are so the audits can see them.
    ttl: int | Decimal | str | None = None
    createdAt: str | None = None

    @property
    def cleanup_kind(self) -> CleanupKind:
        return CleanupKind(self.kind.value)

    @property
    def ttl_epoch_seconds(self) -> int | None:
        """The ttl as DynamoDB's TTL reads it: an integral Number, else None (never acted on)."""
        if isinstance(self.ttl, bool) or self.ttl is None or isinstance(self.ttl, str):
            return None
        if isinstance(self.ttl, Decimal):
            return int(self.ttl) if self.ttl == self.ttl.to_integral_value() else None
        return self.ttl


class UnknownItem(_ItemBase, frozen=True, kw_only=True, gc=False):
    """Anything the contract does not describe, kept whole."""

    kind: Literal[ItemKind.UNKNOWN] = ItemKind.UNKNOWN
    pk: Any = None
    sk: Any = None


Item = EntitlementRow | CleanupRecord | UnknownItem


def _accepted(annotation: Any) -> tuple[tuple[type, ...], bool]:
    """The exact Python types a field's annotation admits (a strict reading: no bool for int), and
    whether the field is required."""
    members = typing.get_args(annotation) if typing.get_origin(annotation) in _UNIONS else (annotation,)
    accepted = tuple(type(None) if member is None else member for member in members)
    return accepted, type(None) not in accepted


_UNIONS = (types.UnionType, typing.Union)
# Per item class: each image attribute it declares -> (the exact types it takes, whether required).
# Derived from the Structs above; `kind` (the class's tag) and `extra` are not image attributes.
ITEM_FIELDS: dict[type[Item], dict[str, tuple[tuple[type, ...], bool]]] = {
    cls: {
        field.name: (_accepted(field.type) if cls is not UnknownItem else ((object,), False))
        for field in msgspec.structs.fields(cls)
        if field.name not in ("kind", "extra")
    }
    for cls in (EntitlementRow, CleanupRecord, UnknownItem)
}
_REQUIRED: dict[type[Any], frozenset[str]] = {
    cls: frozenset(name for name, (_, required) in f.items() if required) for cls, f in ITEM_FIELDS.items()
}
_TEXT_FIELDS: dict[type[Any], frozenset[str]] = {
    cls: frozenset(name for name, (accepted, _) in f.items() if str in accepted)
    for cls, f in ITEM_FIELDS.items()
}
_TEXT = frozenset([str])
_DEFAULT_KIND: dict[type[Any], Any] = {
    cls: field.default
    for cls in ITEM_FIELDS
    for field in msgspec.structs.fields(cls)
    if field.name == "kind" and isinstance(field.default, ItemKind)
}
_ATTRIBUTE_FIELDS: dict[type[Any], tuple[str, ...]] = {cls: tuple(f) for cls, f in ITEM_FIELDS.items()}
_ITEM_CLASS: dict[ItemKind, type[EntitlementRow] | type[CleanupRecord]] = {
    ItemKind.ENTITLEMENT: EntitlementRow,
    ItemKind.CANCELLATION: CleanupRecord,
    ItemKind.STALE: CleanupRecord,
}


def parse_item(image: dict[str, Any]) -> Item:
    """Type a decoded item image (attribute name to value) by its own sort key. Never raises: a known key
    whose image does not fit its class (a required attribute missing, a value of another type) is an
    `UnknownItem`, and every attribute the class does not declare is kept in `extra`."""
    kind = item_kind(image.get(SK))
    cls = _ITEM_CLASS.get(kind)
    if cls is not None and _REQUIRED[cls] <= image.keys():
        fields = ITEM_FIELDS[cls]
        names = image.keys()
        # The common case is checked as a whole: only text, each in a field that takes text.
        fits = (names <= _TEXT_FIELDS[cls] and {*map(type, image.values())} <= _TEXT) or all(
            name not in fields or type(value) in fields[name][0] for name, value in image.items()
        )
        if fits:
            if names <= fields.keys():  # no extra attribute
                if kind is _DEFAULT_KIND.get(cls):
                    return cls(**image)
                return cls(kind=kind, **image)  # type: ignore[arg-type]
            known = {name: value for name, value in image.items() if name in fields}
            extra = {name: value for name, value in image.items() if name not in fields}
            return cls(kind=kind, extra=extra, **known)  # type: ignore[arg-type]
    rest = {name: value for name, value in image.items() if name not in (PK, SK)}
    return UnknownItem(pk=image.get(PK), sk=image.get(SK), extra=rest)

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
    "GUARD_SK",
    "IDEMPOTENCY_SK_PREFIX",
    "ITEM_FIELDS",
    "STALE_SK_PREFIX",
    "USER_PK_PREFIX",
    "CleanupKind",
    "CleanupRecord",
    "EntitlementRow",
    "EntitlementStatus",
    "GuardItem",
    "IdempotencyRecord",
    "Item",
    "ItemKind",
    "UnknownItem",
    "cancellation_key",
    "entitlement_key",
    "gsi1_key",
    "guard_key",
    "idempotency_key",
    "item_class",
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
# The per-user guard: "#" sorts before every other sort key, so a Query of the partition reads it first
# (a transaction committing during the read then changes the version read, and any write conditioned on
# it is refused rather than acting on rows newer than the version).
GUARD_SK = "#GUARD"
IDEMPOTENCY_SK_PREFIX = "IDEMPOTENCY#"
GSI1_NAME = "GSI1"
GSI1_PK_PREFIX = "ARRAY#"
GSI1_SK_VALUE = "ENTITLEMENT"

PK = "pk"
SK = "sk"
TTL_ATTRIBUTE = "ttl"


class EntitlementStatus(StrEnum):
    """The statuses an entitlement row can hold (docs/table.md derives them from the service design)."""

    ACTIVE = "Active"
    SUPERSEDED = "Superseded"  # retired in favour of a newer Array account
    CANCELLED = "Cancelled"  # the user cancelled; a cancellation record schedules cleanup
    REMOVED = "Removed"  # the Array account was deleted by cleanup


class ItemKind(StrEnum):
    ENTITLEMENT = "entitlement"
    CANCELLATION = "cancellation"
    STALE = "stale"
    GUARD = "guard"  # the user's write guard (a version every write path checks and bumps)
    IDEMPOTENCY = "idempotency"  # the first answer to a request sent with an Idempotency-Key
    UNKNOWN = "unknown"


# Enum member lookups cost ~70 ns each on Python 3.11: `item_kind` runs once per stream record, so it
# returns these module-level references to the same members.
_ENTITLEMENT_KIND = ItemKind.ENTITLEMENT
_CANCELLATION_KIND = ItemKind.CANCELLATION
_STALE_KIND = ItemKind.STALE
_GUARD_KIND = ItemKind.GUARD
_IDEMPOTENCY_KIND = ItemKind.IDEMPOTENCY
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


def guard_key(user_id: str) -> dict[str, str]:
    """One per user: every write path of the service checks and bumps its version in its transaction."""
    return {PK: user_pk(user_id), SK: GUARD_SK}


def idempotency_key(user_id: str, key_digest: str) -> dict[str, str]:
    """In the user's partition (so an erasure of the user takes it), on the digest of the client's key."""
    return {PK: user_pk(user_id), SK: f"{IDEMPOTENCY_SK_PREFIX}{key_digest}"}


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
    if sort_key == GUARD_SK:
        return _GUARD_KIND
    if sort_key.startswith(IDEMPOTENCY_SK_PREFIX):
        return _IDEMPOTENCY_KIND
    return _UNKNOWN_KIND


# -- items ----------------------------------------------------------------------------------------------
#
# The ONE statement of the item shapes. Each is a frozen msgspec Struct: the declared attributes as
# fields, every other attribute of the image kept whole in `extra` (name -> decoded value), so a new
# attribute never fails a reader. `pipeline.decode` derives the stream's wire shape from these fields
# and `parse_item` checks an image against them; neither restates them.


class _Attributes:
    """What every item class offers beside its fields (a mixin: no state of its own)."""

    __slots__ = ()
    extra: dict[str, Any]

    @property
    def extra_attributes(self) -> dict[str, Any]:
        return dict(self.extra)

    def attributes(self) -> dict[str, Any]:
        """The item's attributes by name: every declared field (None where absent) and every extra."""
        out = {name: getattr(self, name) for name in _ATTRIBUTE_FIELDS[type(self)]}
        out.update(self.extra)
        return out


# Field order: the image's attributes as declared (required ones first), then `kind` where it has a
# default, then `extra`: the decoder's typed branch builds the items the service writes positionally.


class EntitlementRow(_Attributes, Struct, frozen=True, gc=False):
    """A link from a user to one Array account. Never deleted, except by an erasure."""

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
    kind: Literal[ItemKind.ENTITLEMENT] = ItemKind.ENTITLEMENT
    extra: dict[str, Any] = {}

    @property
    def known_status(self) -> EntitlementStatus | None:
        try:
            return EntitlementStatus(self.status)
        except ValueError:
            return None


class CleanupRecord(_Attributes, Struct, frozen=True, gc=False):
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
    extra: dict[str, Any] = {}

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


class GuardItem(_Attributes, Struct, frozen=True, gc=False):
    """The user's write guard: `version` counts the writes that changed which row is Active or what is
    scheduled; each write path's transaction requires the version it read and writes the next one, so of
    two racing requests one commits and the other is refused (docs/table.md#the-users-guard)."""

    pk: str
    sk: str
    userId: str
    version: int
    updatedAt: str | None = None
    lastWrite: str | None = None  # names the write that set this version (a request's own token)
    kind: Literal[ItemKind.GUARD] = ItemKind.GUARD
    extra: dict[str, Any] = {}


class IdempotencyRecord(_Attributes, Struct, frozen=True, gc=False):
    """The first answer to a request sent with an `Idempotency-Key`: the route and body digest it was
    for, its HTTP status and JSON body, kept until `ttl` (DynamoDB's TTL removes it: that removal is not a
    cleanup's and triggers nothing)."""

    pk: str
    sk: str
    userId: str
    requestDigest: str
    responseStatus: int
    responseBody: str
    ttl: int | Decimal | str | None = None
    createdAt: str | None = None
    kind: Literal[ItemKind.IDEMPOTENCY] = ItemKind.IDEMPOTENCY
    extra: dict[str, Any] = {}


class UnknownItem(_Attributes, Struct, frozen=True, kw_only=True, gc=False):
    """Anything the contract does not describe, kept whole."""

    pk: Any = None
    sk: Any = None
    kind: Literal[ItemKind.UNKNOWN] = ItemKind.UNKNOWN
    extra: dict[str, Any] = {}


Item = EntitlementRow | CleanupRecord | GuardItem | IdempotencyRecord | UnknownItem


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
    for cls in (EntitlementRow, CleanupRecord, GuardItem, IdempotencyRecord, UnknownItem)
}
_TEXT = frozenset([str])


_TypedItem = EntitlementRow | CleanupRecord | GuardItem | IdempotencyRecord


def _spec(cls: type[_TypedItem]) -> tuple[Any, ...]:
    """What `parse_item` reads of an item class: its fields, the required ones, the ones that take text,
    and whether its `kind` must be given (no default)."""
    fields = ITEM_FIELDS[cls]
    kind = next(field for field in msgspec.structs.fields(cls) if field.name == "kind")
    return (
        cls,
        fields,
        frozenset(name for name, (_, required) in fields.items() if required),
        frozenset(name for name, (accepted, _) in fields.items() if str in accepted),
        not isinstance(kind.default, ItemKind),
    )


# The item class of each known kind (the sort key's), with what `parse_item` reads of it.
_SPECS: dict[ItemKind, tuple[Any, ...]] = {
    ItemKind.ENTITLEMENT: _spec(EntitlementRow),
    ItemKind.CANCELLATION: _spec(CleanupRecord),
    ItemKind.STALE: _spec(CleanupRecord),
    ItemKind.GUARD: _spec(GuardItem),
    ItemKind.IDEMPOTENCY: _spec(IdempotencyRecord),
}
_ATTRIBUTE_FIELDS: dict[type[Any], tuple[str, ...]] = {cls: tuple(f) for cls, f in ITEM_FIELDS.items()}


def item_class(kind: ItemKind) -> type[_TypedItem] | None:
    """The item class an image of this kind (read from its own sort key) is typed as, if any."""
    spec = _SPECS.get(kind)
    return None if spec is None else spec[0]


def parse_item(image: dict[str, Any]) -> Item:
    """Type a decoded item image (attribute name to value) by its own sort key. Never raises: a known key
    whose image does not fit its class (a required attribute missing, a value of another type) is an
    `UnknownItem`, and every attribute the class does not declare is kept in `extra`."""
    kind = item_kind(image.get(SK))
    spec = _SPECS.get(kind)
    if spec is not None:
        cls, fields, required, text, give_kind = spec
        names = image.keys()
        if required <= names:
            # The common case is checked as a whole: only text, each in a field that takes text.
            if names <= text and _TEXT.issuperset(map(type, image.values())):
                return cls(kind=kind, **image) if give_kind else cls(**image)  # type: ignore[no-any-return]
            if all(name not in fields or type(value) in fields[name][0] for name, value in image.items()):
                known = {name: value for name, value in image.items() if name in fields}
                extra = {name: value for name, value in image.items() if name not in fields}
                return cls(kind=kind, extra=extra, **known)  # type: ignore[no-any-return]
    rest = {name: value for name, value in image.items() if name not in (PK, SK)}
    return UnknownItem(pk=image.get(PK), sk=image.get(SK), extra=rest)

"""The entitlements table's item shapes: keys, item kinds, statuses and typed items.

This is the contract everything else keys on. See docs/table.md for the reasoning behind each choice.

Items are read from plain Python values (a decoded DynamoDB image: str, int, Decimal, bytes, sets,
lists, dicts). Parsing never fails on an unknown attribute or an unknown status: those are kept and
reported, so a change in the service never crashes a reader.
"""

from __future__ import annotations

__all__ = [
    "CANCELLATION_SK",
    "ENTITLEMENT_SK_PREFIX",
    "GSI1_NAME",
    "GSI1_PK_PREFIX",
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

from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

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


_ITEM_CONFIG = ConfigDict(frozen=True, strict=True, extra="allow", populate_by_name=True)


class EntitlementRow(BaseModel):
    """A link from a user to one Array account. Never deleted, except by an erasure."""

    model_config = _ITEM_CONFIG
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

    @property
    def extra_attributes(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class CleanupRecord(BaseModel):
    """Carries the TTL that schedules an Array account for deletion."""

    model_config = _ITEM_CONFIG
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


class UnknownItem(BaseModel):
    """Anything the contract does not describe, kept whole."""

    model_config = _ITEM_CONFIG
    kind: Literal[ItemKind.UNKNOWN] = ItemKind.UNKNOWN
    pk: object = None
    sk: object = None


Item = EntitlementRow | CleanupRecord | UnknownItem


def parse_item(image: dict[str, Any]) -> Item:
    """Type a decoded item image. Falls back to `UnknownItem` rather than raising."""
    kind = item_kind(image.get(SK))
    try:
        if kind is ItemKind.ENTITLEMENT:
            return EntitlementRow.model_validate({**image, "kind": kind})
        if kind in (ItemKind.CANCELLATION, ItemKind.STALE):
            return CleanupRecord.model_validate({**image, "kind": kind})
    except ValueError:
        pass  # a known key with a malformed body is reported as unknown, never dropped
    return UnknownItem.model_validate({**image, "kind": ItemKind.UNKNOWN})

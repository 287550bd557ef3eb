"""The adapter's stream record as msgspec structs: the shapes of the records the entitlements service
writes (docs/table.md), for `pipeline._wire_events`, which says why and what it does with them.
"""

from __future__ import annotations

__all__ = ["NO_IMAGE", "Change", "Identity", "Item", "Record", "decode_record_bytes"]

import msgspec
from msgspec import UNSET, Struct, UnsetType

# `forbid_unknown_fields` on the values and items: a second type key or an attribute the table does not
# define fails the decode. The envelope ignores what it does not read, as the validated path does. None
# of these can form a cycle, so the garbage collector need not track them (`gc=False`).


class StringValue(Struct, forbid_unknown_fields=True, gc=False):
    S: str


class NumberValue(Struct, forbid_unknown_fields=True, gc=False):
    N: str


class Item(Struct, forbid_unknown_fields=True, gc=False):
    """An image holding the table's own attributes only (docs/table.md)."""

    pk: StringValue | UnsetType = UNSET
    sk: StringValue | UnsetType = UNSET
    userId: StringValue | UnsetType = UNSET
    arrayAccountId: StringValue | UnsetType = UNSET
    status: StringValue | UnsetType = UNSET  # entitlement rows
    createdAt: StringValue | UnsetType = UNSET
    updatedAt: StringValue | UnsetType = UNSET  # entitlement rows
    processorToken: StringValue | UnsetType = UNSET  # entitlement rows
    gsi1pk: StringValue | UnsetType = UNSET  # entitlement rows
    gsi1sk: StringValue | UnsetType = UNSET  # entitlement rows
    ttl: NumberValue | UnsetType = UNSET  # cleanup records


NO_IMAGE = Item()  # the adapter writes an absent image as {}


class Identity(Struct, gc=False):
    # Either casing is read, lowercase first (see `pipeline.decode`).
    type: str | UnsetType = UNSET
    principalId: str | UnsetType = UNSET
    Type: str | UnsetType = UNSET
    PrincipalId: str | UnsetType = UNSET


class Change(Struct, gc=False):
    ApproximateCreationDateTime: int  # epoch milliseconds in the adapter's shape
    Keys: dict[str, StringValue]
    SequenceNumber: str | UnsetType = UNSET
    NewImage: Item | UnsetType = UNSET
    OldImage: Item | UnsetType = UNSET


class Record(Struct, gc=False):
    eventID: str
    eventName: str
    dynamodb: Change
    userIdentity: Identity | UnsetType = UNSET
    eventSourceARN: str | UnsetType = UNSET


decode_record_bytes = msgspec.json.Decoder(Record).decode

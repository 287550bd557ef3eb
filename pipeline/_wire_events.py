"""The first fast path of `pipeline.decode_record`: the adapter's bytes typed in one pass.

The KCL child spends most of a record's time making Python objects: parsing the JSON into dicts (one
per attribute value, ``{"S": "..."}``), then unwrapping each value and building the event. Here msgspec
decodes the bytes straight into structs shaped like the records the entitlements service writes
(`pipeline._wire_shapes`), and checks every type on the way, in C. `wire_event` then checks what a
type cannot say (the sequence number, the creation time's range, the item kind, which images the
change implies, each item's required attributes) and builds the event with
`pipeline._fast_events.build_event`, as that path does.

What it recognises: an adapter record whose ``Keys`` are strings and whose images hold only the table's
own attributes (docs/table.md), each a string (``S``) but a cleanup record's ``ttl``, a Number (``N``);
with an entitlement row's attributes on entitlement rows only and a cleanup record's on cleanup records.
That is every record the service writes. Anything else fails to decode or to check, and `wire_event`
returns ``None``: an extra attribute, a NULL, a string ttl (a planted fault), an unknown item, a
malformed value, bad JSON. The caller then runs the dict-based fast path and the validated path from
the start, which alone decide everything else and raise every `DecodeError`. This function never raises
on bad data and never guesses.

The rules it applies are the validated path's (`pipeline.decode`), and the property tests in
tests/pipeline/test_decode_fast_path.py hold it to them: for any record, the same event or the same
error. Where JSON itself is concerned, msgspec and orjson agree on what they refuse (invalid UTF-8,
lone surrogates, a byte-order mark, control characters in strings) and on duplicate keys (the last
wins); a test pins those cases.

Speed (bench/bench_decode.py): msgspec's decode into these structs takes about 60% of the time
`orjson.loads` takes to build the dicts, and leaves no attribute value to check by hand. With the
instances built by `pipeline._instances` (compiled), `decode_record` runs at about 2.7x AWS Lambda
Powertools' DynamoDBStreamModel on the bench's records, where the dict fast path gives 1.8x.
"""

from __future__ import annotations

__all__ = ["wire_event"]

from datetime import UTC, datetime
from typing import Any

import msgspec
from msgspec import UNSET

from pipeline._attribute_values import parse_number
from pipeline._fast_events import build_event
from pipeline._instances import new_instance
from pipeline._record_format import (
    CHANGES,
    EXACT_MILLIS_LIMIT,
    INSERT,
    REMOVE,
    TTL_IDENTITY_TYPE,
    TTL_PRINCIPAL,
)
from pipeline._wire_shapes import NO_IMAGE, Change, Identity, Item, decode_record_bytes
from pipeline.errors import DecodeError
from pipeline.events import SEQUENCE_WIDTH, ChangeKind, StreamEvent
from schema.table import CleanupRecord, EntitlementRow, ItemKind, item_kind

_ENTITLEMENT = ItemKind.ENTITLEMENT
_UNKNOWN = ItemKind.UNKNOWN
_from_timestamp = datetime.fromtimestamp


# -- items ----------------------------------------------------------------------------------------------

_ENTITLEMENT_FIELDS_SET = frozenset(EntitlementRow.model_fields)
_ENTITLEMENT_REQUIRED = frozenset(["kind", "pk", "sk", "userId", "arrayAccountId", "status"])
_ENTITLEMENT_OPTIONAL = ("createdAt", "updatedAt", "processorToken", "gsi1pk", "gsi1sk")
_CLEANUP_REQUIRED = frozenset(["kind", "pk", "sk", "userId", "arrayAccountId"])


def _entitlement_row(item: Item, sort_key: str) -> EntitlementRow | None:
    if item.ttl is not UNSET:  # a ttl on an entitlement row is an extra (and a finding)
        return None
    # The complete row, as the service writes it. An absent attribute is UNSET, which has no `.S`: the
    # AttributeError sends the row to the slower, explicit reading (a try costs nothing in Python 3.11).
    complete: Any = item
    try:
        fields = {
            "kind": _ENTITLEMENT,
            "pk": complete.pk.S,
            "sk": complete.sk.S,
            "userId": complete.userId.S,
            "arrayAccountId": complete.arrayAccountId.S,
            "status": complete.status.S,
            "createdAt": complete.createdAt.S,
            "updatedAt": complete.updatedAt.S,
            "processorToken": complete.processorToken.S,
            "gsi1pk": complete.gsi1pk.S,
            "gsi1sk": complete.gsi1sk.S,
        }
    except AttributeError:
        return _partial_entitlement_row(item, sort_key)
    if fields["sk"] != sort_key:
        return None
    return new_instance(EntitlementRow, fields, _ENTITLEMENT_FIELDS_SET, {})


def _partial_entitlement_row(item: Item, sort_key: str) -> EntitlementRow | None:
    """A row without some of its optional attributes: those are None, and not in the fields set."""
    pk, sk, user_id, account, status = item.pk, item.sk, item.userId, item.arrayAccountId, item.status
    if (
        pk is UNSET
        or sk is UNSET
        or user_id is UNSET
        or account is UNSET
        or status is UNSET
        or sort_key != sk.S
    ):
        return None
    optional = {name: getattr(item, name) for name in _ENTITLEMENT_OPTIONAL}
    fields: dict[str, Any] = {
        "kind": _ENTITLEMENT,
        "pk": pk.S,
        "sk": sk.S,
        "userId": user_id.S,
        "arrayAccountId": account.S,
        "status": status.S,
    }
    fields.update({name: None if value is UNSET else value.S for name, value in optional.items()})
    present = (name for name, value in optional.items() if value is not UNSET)
    return new_instance(EntitlementRow, fields, _ENTITLEMENT_REQUIRED.union(present), {})


def _cleanup_record(item: Item, sort_key: str, kind: ItemKind) -> CleanupRecord | None:
    pk, sk, user_id, account = item.pk, item.sk, item.userId, item.arrayAccountId
    if (
        pk is UNSET
        or sk is UNSET
        or user_id is UNSET
        or account is UNSET
        # An entitlement row's attribute on a cleanup record is an extra: the other paths keep it.
        or item.status is not UNSET
        or item.updatedAt is not UNSET
        or item.processorToken is not UNSET
        or item.gsi1pk is not UNSET
        or item.gsi1sk is not UNSET
        or sort_key != sk.S
    ):
        return None
    ttl, created = item.ttl, item.createdAt
    fields = {
        "kind": kind,
        "pk": pk.S,
        "sk": sk.S,
        "userId": user_id.S,
        "arrayAccountId": account.S,
        "ttl": None if ttl is UNSET else parse_number(ttl.N),  # DecodeError: the caller gives up
        "createdAt": None if created is UNSET else created.S,
    }
    fields_set = set(_CLEANUP_REQUIRED)
    if ttl is not UNSET:
        fields_set.add("ttl")
    if created is not UNSET:
        fields_set.add("createdAt")
    return new_instance(CleanupRecord, fields, fields_set, {})


# -- the event ------------------------------------------------------------------------------------------

_Items = tuple[EntitlementRow | CleanupRecord | None, EntitlementRow | CleanupRecord | None]


def _is_ttl_identity(identity: Identity) -> bool | None:
    """Whether ``userIdentity`` is DynamoDB's TTL service; None when it names neither a type nor a
    principal (the validated path refuses that). Either casing is read, lowercase first."""
    kind = identity.type if identity.type is not UNSET else identity.Type
    principal = identity.principalId if identity.principalId is not UNSET else identity.PrincipalId
    if kind is UNSET and principal is UNSET:
        return None
    return kind == TTL_IDENTITY_TYPE and principal == TTL_PRINCIPAL


def _items(change: ChangeKind, kind: ItemKind, sort_key: str, ddb: Change) -> _Items | None:
    """The typed (new, old) items, when the record has exactly the images its change implies (INSERT:
    new only; MODIFY: both; REMOVE: old only) and each fits its kind; else None."""
    new: Item | None = None if ddb.NewImage is UNSET else ddb.NewImage
    old: Item | None = None if ddb.OldImage is UNSET else ddb.OldImage
    if new is not None and new.pk is UNSET and new == NO_IMAGE:
        new = None
    if old is not None and old.pk is UNSET and old == NO_IMAGE:
        old = None
    if (new is None) != (change is REMOVE) or (old is None) != (change is INSERT):
        return None
    if kind is _ENTITLEMENT:
        new_item: EntitlementRow | CleanupRecord | None = (
            None if new is None else _entitlement_row(new, sort_key)
        )
        old_item: EntitlementRow | CleanupRecord | None = (
            None if old is None else _entitlement_row(old, sort_key)
        )
    else:
        try:
            new_item = None if new is None else _cleanup_record(new, sort_key, kind)
            old_item = None if old is None else _cleanup_record(old, sort_key, kind)
        except DecodeError:
            return None  # a ttl that is not a DynamoDB number: the validated path raises
    if (new is not None and new_item is None) or (old is not None and old_item is None):
        return None
    return new_item, old_item


def wire_event(data: bytes, stream_arn: str, shard_id: str, read_at: str | None) -> StreamEvent | None:
    """The event the validated path gives for the adapter record `data`, or None when the record is not
    one this path positively recognises (see the module). Never raises on bad data.

    `read_at`: the KCL record's sequence number, or None.
    """
    if type(stream_arn) is not str or type(shard_id) is not str:
        return None
    try:
        record = decode_record_bytes(data)
    except msgspec.MsgspecError:
        return None
    event_id = record.eventID
    change = CHANGES.get(record.eventName)
    if not event_id or change is None:
        return None
    ddb = record.dynamodb

    sequence = ddb.SequenceNumber
    if sequence is UNSET:
        if read_at is None:
            return None
        sequence = read_at
    if not (0 < len(sequence) <= SEQUENCE_WIDTH and sequence.isdigit() and sequence.isascii()):
        return None
    if read_at is not None and sequence != read_at:
        return None

    created = ddb.ApproximateCreationDateTime
    if not 0 <= created < EXACT_MILLIS_LIMIT:
        return None
    created_at = _from_timestamp(created / 1000, UTC)  # as `pipeline.decode` computes it

    source_arn = record.eventSourceARN
    if source_arn is not UNSET and source_arn != stream_arn:
        return None
    ttl_deletion = False
    if record.userIdentity is not UNSET:
        is_ttl = _is_ttl_identity(record.userIdentity)
        if is_ttl is None:
            return None
        ttl_deletion = is_ttl and change is REMOVE

    keys = {}
    for name, value in ddb.Keys.items():  # a loop: a comprehension costs a call on Python 3.11
        keys[name] = value.S
    sort_key = keys.get("sk")
    kind = item_kind(sort_key)
    if kind is _UNKNOWN or sort_key is None:  # a known kind implies a sort key
        return None
    items = _items(change, kind, sort_key, ddb)
    if items is None:
        return None
    new_item, old_item = items
    return build_event(
        change, kind, event_id, sequence, created_at, keys, new_item, old_item, ttl_deletion,
        stream_arn, shard_id,
    )  # fmt: skip

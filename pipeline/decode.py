"""DynamoDB stream records to typed events (`pipeline.events`), in both shapes records arrive in.

- `decode_record`: the KCL adapter's shape. The multilang record's data is the JSON of the whole stream
  record; ``ApproximateCreationDateTime`` is epoch **milliseconds** and ``userIdentity`` has lowercase
  keys (``principalId``, ``type``). This is the consumer's hot path: bytes in, validated event out.
- `decode_stream_record`: the raw GetRecords / Lambda shape, already parsed into a mapping.
  ``ApproximateCreationDateTime`` is epoch **seconds** (an int or float, or an aware datetime when boto3
  parsed it); ``userIdentity`` is ``PrincipalId``/``Type`` from GetRecords, lowercase in Lambda events.
  Both casings are read in both shapes: mistaking a TTL deletion for a cancellation would leave an
  Array account with no cleanup.

Both go through one classification core. The kind of item comes from the sort key in ``Keys``
(`schema.table.item_kind`), the change from ``eventName``:

=================  ===========================  ============================================================
item kind          eventName                    event
=================  ===========================  ============================================================
entitlement        INSERT                       EntitlementCreated
entitlement        MODIFY, status differs       EntitlementStatusChanged (from_status -> to_status)
entitlement        MODIFY, same status          EntitlementUpdated
entitlement        REMOVE                       EntitlementRemoved
cancellation/stale INSERT                       CleanupScheduled
cancellation/stale MODIFY                       CleanupUpdated
cancellation/stale REMOVE by the TTL identity   CleanupExpired (ttl_deletion=True)
cancellation/stale REMOVE otherwise             CleanupCancelled
anything else                                   UnknownItemChanged
=================  ===========================  ============================================================

"Anything else" includes an unknown sort key and a known key whose image does not fit its shape (what
`schema.table.parse_item` returns as `UnknownItem`): such records are typed as unknown, never refused.
A new attribute or an unknown status never raises. The TTL identity is ``userIdentity`` type
``Service`` with principal ``dynamodb.amazonaws.com``; ``ttl_deletion`` is set on every REMOVE that
carries it.

What is refused, with `DecodeError` (a `TerminalError`): a record that is not the stream record's shape
(not JSON, no eventID, an unknown eventName, no ``dynamodb`` section, no or a malformed sequence number
or creation time, no ``Keys``), any malformed attribute value (see `pipeline._attribute_values`), a
``userIdentity`` that names neither type nor principal, an attribute name that is not valid Unicode
text (a lone surrogate, which only a raw-shape mapping can hold), and a record that names another
stream or another sequence number than the one it was read at. The error's message names the reason only; its
context holds the shard, and the sequence number and event id where they could be read.

Speed (``make bench``, bench/bench_decode.py). Three paths give the same events, tried in this order:

- The wire path (`pipeline._wire_events`, adapter bytes only): msgspec decodes the bytes straight into
  structs shaped like the records the service writes, checking every type in C, and the event is built
  from them. Every record the service writes takes it; anything else (an extra attribute, a NULL, a
  string ttl, an unknown item, bad JSON) falls through to the next path. Measured on the bench's
  entitlement MODIFY records: about 2.7x AWS Lambda Powertools' DynamoDBStreamModel.
- The dict fast path (`pipeline._fast_events`, both shapes): for the common, well-formed records parsed
  into dicts (an entitlement row or a cleanup record of a known kind, its images as the change implies,
  every field of the exact type the strict models require, extras allowed) it checks each field
  explicitly in plain Python and builds the event, its position and its items as `model_construct`
  does, without pydantic's validator. Anything it does not positively recognise (an unknown item, a
  malformed or unusual record, anything that would raise) it leaves, returning None, to the validated
  path.
- The validated path: a known item kind whose images fit their shape is validated by pydantic in one
  call on the event class with the images as plain dicts, so pydantic-core builds the event, its
  position and both items in one pass: about 20% less pydantic time than validating each item first
  and the event after (5.3 against 6.6 us a record, measured). The call goes straight to the class's
  validator, ``__pydantic_validator__.validate_python``, which is what ``model_validate`` runs after
  its argument checks. When that validation fails the record takes the exact path: `parse_item` on
  each image, the event the typed items allow, else `UnknownItemChanged`.

Both fast paths build instances with `pipeline._instances.new_instance` (compiled with Cython by the
set-up; a Python build of the same state otherwise).

Property tests force records through each path and compare: the fast paths against the validated path
(tests/pipeline/test_decode_fast_path.py: equal models, dumps, fields sets and extras, or the same
error), and the one-call validation against the exact path (tests/pipeline/test_decode.py).
"""

from __future__ import annotations

__all__ = ["DecodeError", "decode_record", "decode_stream_record"]

import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import orjson
from pydantic import ValidationError

from pipeline._attribute_values import decode_image
from pipeline._fast_events import FAST_PATH_ENABLED, fast_event
from pipeline._record_format import (
    CHANGES,
    EXACT_MILLIS_LIMIT,
    INSERT,
    MODIFY,
    REMOVE,
    TTL_IDENTITY_TYPE,
    TTL_PRINCIPAL,
)
from pipeline._wire_events import wire_event
from pipeline.errors import DecodeError
from pipeline.events import (
    SEQUENCE_WIDTH,
    ChangeKind,
    CleanupCancelled,
    CleanupExpired,
    CleanupScheduled,
    CleanupUpdated,
    EntitlementCreated,
    EntitlementRemoved,
    EntitlementStatusChanged,
    EntitlementUpdated,
    StreamEvent,
    UnknownItemChanged,
)
from schema.errors import RecordContext
from schema.table import (
    USER_PK_PREFIX,
    CleanupRecord,
    EntitlementRow,
    Item,
    ItemKind,
    item_kind,
    parse_item,
)

# Attribute names of the table's keys (docs/table.md).
_PK = "pk"
_SK = "sk"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CLEANUP_KINDS = (ItemKind.CANCELLATION, ItemKind.STALE)
_ENTITLEMENT = ItemKind.ENTITLEMENT
_UNKNOWN = ItemKind.UNKNOWN
_USER_PK_LENGTH = len(USER_PK_PREFIX)
_MAX_EVENT_ID_IN_CONTEXT = 128


def _no_fast_path(
    record: Any, stream_arn: str, shard_id: str, read_at: str | None, adapter: bool
) -> StreamEvent | None:
    return None


def _no_wire_path(data: bytes, stream_arn: str, shard_id: str, read_at: str | None) -> StreamEvent | None:
    return None


# The fast paths (`pipeline._wire_events` from the adapter's bytes, `pipeline._fast_events` from a parsed
# record): the exact event for the records each positively recognises, else None and the next path.
# Both are off when the models no longer match their checks.
_wire_event = wire_event if FAST_PATH_ENABLED else _no_wire_path
_fast_event = fast_event if FAST_PATH_ENABLED else _no_fast_path


# -- public entry points --------------------------------------------------------------------------------


def decode_record(
    data: bytes,
    *,
    stream_arn: str,
    shard_id: str,
    sequence_number: str | None = None,
) -> StreamEvent:
    """One KCL adapter record (the JSON of a whole stream record) to its typed event.

    `sequence_number` is the KCL record's sequence number; when given, the stream record's own
    ``SequenceNumber`` must equal it (the adapter sets one from the other).
    """
    event = _wire_event(data, stream_arn, shard_id, sequence_number)
    if event is not None:
        return event
    record: Any = None
    try:
        try:
            record = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise DecodeError("record is not valid JSON") from None
        event = _fast_event(record, stream_arn, shard_id, sequence_number, True)
        if event is not None:
            return event
        if type(record) is not dict:
            raise DecodeError("record is not a JSON object")
        return _decode(record, stream_arn, shard_id, sequence_number, adapter=True)
    except DecodeError as error:
        raise DecodeError(error.reason, context=_context(record, shard_id, sequence_number)) from None


def decode_stream_record(record: Mapping[str, Any], *, stream_arn: str, shard_id: str) -> StreamEvent:
    """One raw stream record (GetRecords via boto3, or a Lambda event's record) to its typed event."""
    try:
        event = _fast_event(record, stream_arn, shard_id, None, False)
        if event is not None:
            return event
        if not isinstance(record, Mapping):
            raise DecodeError("record is not an object")
        return _decode(record, stream_arn, shard_id, None, adapter=False)
    except DecodeError as error:
        raise DecodeError(error.reason, context=_context(record, shard_id, None)) from None


# -- the envelope ---------------------------------------------------------------------------------------


def _decode(
    record: Mapping[str, Any],
    stream_arn: str,
    shard_id: str,
    read_at: str | None,
    *,
    adapter: bool,
) -> StreamEvent:
    """The one core both shapes share. `adapter`: epoch milliseconds and a record parsed from JSON."""
    event_id = record.get("eventID")
    if type(event_id) is not str or not event_id:
        raise DecodeError("eventID is missing or not a string")
    event_name = record.get("eventName")
    change = CHANGES.get(event_name) if type(event_name) is str else None
    if change is None:
        raise DecodeError("eventName is not INSERT, MODIFY or REMOVE")
    ddb = record.get("dynamodb")
    if type(ddb) is not dict and not isinstance(ddb, Mapping):
        raise DecodeError("dynamodb section is missing or not an object")

    sequence = ddb.get("SequenceNumber")
    if sequence is None:
        sequence = read_at
        if sequence is None:
            raise DecodeError("SequenceNumber is missing")
    if not (
        type(sequence) is str
        and 0 < len(sequence) <= SEQUENCE_WIDTH
        and sequence.isdigit()
        and sequence.isascii()
    ):  # `_is_sequence`, inlined
        raise DecodeError("SequenceNumber is not a string of at most 48 decimal digits")
    if read_at is not None and sequence != read_at:
        raise DecodeError("SequenceNumber differs from the sequence number the record was read at")

    created = ddb.get("ApproximateCreationDateTime")
    if adapter and type(created) is int and 0 <= created < EXACT_MILLIS_LIMIT:
        # Exact: below 2**32 s a float's error is under half a microsecond and fromtimestamp rounds to
        # the microsecond, so a whole millisecond comes back whole (a property test checks it).
        created_at = datetime.fromtimestamp(created / 1000, UTC)
    else:
        created_at = _from_millis(created) if adapter else _from_seconds(created)

    source_arn = record.get("eventSourceARN")
    if source_arn is not None and source_arn != stream_arn:
        raise DecodeError("eventSourceARN names another stream than the one being read")

    keys_av = ddb.get("Keys")
    if keys_av is None:
        raise DecodeError("Keys is missing")
    # Each image names its section in an error; try blocks cost nothing when nothing is raised.
    try:
        keys = decode_image(keys_av, names_are_text=adapter)
    except DecodeError as error:
        raise DecodeError(f"Keys: {error.reason}") from None
    # The adapter writes an absent image as {}; no stored item is empty (it holds at least its keys),
    # so an empty image always means "no image".
    new_av = ddb.get("NewImage") or None
    try:
        new = None if new_av is None else decode_image(new_av, names_are_text=adapter)
    except DecodeError as error:
        raise DecodeError(f"NewImage: {error.reason}") from None
    old_av = ddb.get("OldImage") or None
    try:
        old = None if old_av is None else decode_image(old_av, names_are_text=adapter)
    except DecodeError as error:
        raise DecodeError(f"OldImage: {error.reason}") from None

    identity = record.get("userIdentity")
    ttl_deletion = identity is not None and _is_ttl_identity(identity) and change is REMOVE
    position = {"stream_arn": stream_arn, "shard_id": shard_id, "sequence_number": sequence}
    return _event(
        event_id, change, position, created_at, keys=keys, new=new, old=old, ttl_deletion=ttl_deletion
    )


def _is_sequence(sequence: Any) -> bool:
    return (
        type(sequence) is str
        and 0 < len(sequence) <= SEQUENCE_WIDTH
        and sequence.isdigit()
        and sequence.isascii()
    )


def _is_ttl_identity(identity: Any) -> bool:
    """Whether ``userIdentity`` is DynamoDB's TTL service. Either key casing is read (see the module)."""
    if not isinstance(identity, Mapping):
        raise DecodeError("userIdentity is not an object")
    kind = identity.get("type", identity.get("Type"))
    principal = identity.get("principalId", identity.get("PrincipalId"))
    if kind is None and principal is None:
        raise DecodeError("userIdentity names neither a type nor a principal")
    if (kind is not None and type(kind) is not str) or (principal is not None and type(principal) is not str):
        raise DecodeError("userIdentity type or principal is not a string")
    return kind == TTL_IDENTITY_TYPE and principal == TTL_PRINCIPAL


def _from_millis(value: Any) -> datetime:
    """The adapter's ApproximateCreationDateTime: epoch milliseconds (integers exactly)."""
    if type(value) is int:
        try:
            return _EPOCH + timedelta(milliseconds=value)
        except OverflowError:
            raise DecodeError("ApproximateCreationDateTime is out of range") from None
    if type(value) is float:
        return _offset(value / 1000.0)
    raise DecodeError("ApproximateCreationDateTime is missing or not a number")


def _from_seconds(value: Any) -> datetime:
    """GetRecords / Lambda ApproximateCreationDateTime: epoch seconds, or a datetime from boto3."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise DecodeError("ApproximateCreationDateTime has no time zone")
        return value.astimezone(UTC)
    if type(value) is int:
        try:
            return _EPOCH + timedelta(seconds=value)
        except OverflowError:
            raise DecodeError("ApproximateCreationDateTime is out of range") from None
    if type(value) is float or type(value) is Decimal:
        return _offset(float(value))
    raise DecodeError("ApproximateCreationDateTime is missing or not a number")


def _offset(seconds: float) -> datetime:
    if not math.isfinite(seconds):
        raise DecodeError("ApproximateCreationDateTime is not finite")
    try:
        return _EPOCH + timedelta(seconds=seconds)
    except OverflowError:
        raise DecodeError("ApproximateCreationDateTime is out of range") from None


def _context(record: Any, shard_id: str, read_at: str | None) -> RecordContext:
    """Where a refused record sits: only values that are positions, and only when well formed."""
    sequence = read_at if _is_sequence(read_at) else None
    event_id = None
    if isinstance(record, Mapping):
        candidate = record.get("eventID")
        if (
            type(candidate) is str
            and 0 < len(candidate) <= _MAX_EVENT_ID_IN_CONTEXT
            and candidate.isascii()
            and candidate.replace("-", "").isalnum()
        ):
            event_id = candidate
        ddb = record.get("dynamodb")
        if sequence is None and isinstance(ddb, Mapping) and _is_sequence(ddb.get("SequenceNumber")):
            sequence = ddb.get("SequenceNumber")
    return RecordContext(shard_id=shard_id, sequence_number=sequence, event_id=event_id)


# -- classification -------------------------------------------------------------------------------------


def _event(
    event_id: str,
    change: ChangeKind,
    position: dict[str, str],
    created_at: datetime,
    *,
    keys: dict[str, Any],
    new: dict[str, Any] | None,
    old: dict[str, Any] | None,
    ttl_deletion: bool,
) -> StreamEvent:
    """Classify and validate. The common case is decided inline (one call per record matters here:
    see bench/bench_decode.py); everything else takes `_classify_exactly`.

    The fast case: a known item kind whose present images carry the keys' sort key and no attribute
    named like the models' ``kind`` field (which `parse_item` overrides). Enum members are compared
    through module-level references: a member lookup on the class costs ~70 ns on Python 3.11.
    """
    # The user: the item's userId (new image first), else what follows USER# in the partition key.
    user_id = new.get("userId") if new is not None else None
    if (type(user_id) is not str or not user_id) and old is not None:
        user_id = old.get("userId")
    if type(user_id) is not str or not user_id:
        pk = keys.get(_PK)
        if type(pk) is str and pk.startswith(USER_PK_PREFIX) and len(pk) > _USER_PK_LENGTH:
            user_id = pk[_USER_PK_LENGTH:]
        else:
            user_id = None

    sort_key = keys.get(_SK)
    kind = item_kind(sort_key)
    payload = {
        "event_id": event_id,
        "change": change,
        "position": position,
        "created_at": created_at,
        "keys": keys,
        "item_kind": kind,
        "user_id": user_id,
        "ttl_deletion": ttl_deletion,
    }
    event_class: type[StreamEvent] | None = None
    if (
        kind is not _UNKNOWN
        and (new is None or (new.get(_SK) == sort_key and "kind" not in new))
        and (old is None or (old.get(_SK) == sort_key and "kind" not in old))
    ):
        if change is MODIFY:
            if new is not None and old is not None:
                if kind is not _ENTITLEMENT:
                    event_class = CleanupUpdated
                elif new.get("status") != old.get("status"):
                    event_class = EntitlementStatusChanged
                    payload["from_status"] = old.get("status")
                    payload["to_status"] = new.get("status")
                else:
                    event_class = EntitlementUpdated
        elif change is INSERT:
            if new is not None and old is None:
                event_class = EntitlementCreated if kind is _ENTITLEMENT else CleanupScheduled
        elif new is None:  # a REMOVE carries no new image
            if kind is _ENTITLEMENT:
                event_class = EntitlementRemoved
            else:
                event_class = CleanupExpired if ttl_deletion else CleanupCancelled
    if event_class is not None:
        # Tag each image with its kind as `parse_item` would, in place (the dicts are ours), and let
        # pydantic build the event, its position and its items in one call.
        if new is not None:
            new["kind"] = kind
            payload["new_item"] = new
        if old is not None:
            old["kind"] = kind
            payload["old_item"] = old
        try:
            return _VALIDATE[event_class](payload)
        except ValidationError:
            # An image that does not fit its shape: take the exact path, which types it as unknown.
            for image in (new, old):
                if image is not None:
                    del image["kind"]
            for field in ("new_item", "old_item", "from_status", "to_status"):
                payload.pop(field, None)
    return _classify_exactly(payload, change, new, old)


def _classify_exactly(
    payload: dict[str, Any],
    change: ChangeKind,
    new: dict[str, Any] | None,
    old: dict[str, Any] | None,
) -> StreamEvent:
    """The reference classification: type each image with `parse_item`, then pick the event."""
    try:
        new_item = None if new is None else parse_item(new)
        old_item = None if old is None else parse_item(old)
    except ValidationError:
        # `parse_item` falls back to `UnknownItem`, which takes any value but not an attribute name
        # pydantic cannot read as text (a lone surrogate: only the raw shape can carry one). Its own
        # error would name the attribute.
        raise DecodeError("an attribute name is not valid Unicode text") from None
    payload["new_item"] = new_item
    payload["old_item"] = old_item
    event_class = _exact_class(
        payload["item_kind"], change, new_item, old_item, ttl_deletion=payload["ttl_deletion"]
    )
    if event_class is not None:
        if (
            event_class is EntitlementStatusChanged
            and isinstance(new_item, EntitlementRow)
            and isinstance(old_item, EntitlementRow)
        ):
            payload["from_status"] = old_item.status
            payload["to_status"] = new_item.status
        try:
            return _VALIDATE[event_class](payload)
        except ValidationError:
            payload.pop("from_status", None)
            payload.pop("to_status", None)
    try:
        return _VALIDATE[UnknownItemChanged](payload)
    except ValidationError:
        raise DecodeError("record does not fit the event contract") from None


def _exact_class(
    kind: ItemKind,
    change: ChangeKind,
    new_item: Item | None,
    old_item: Item | None,
    *,
    ttl_deletion: bool,
) -> type[StreamEvent] | None:
    if kind is ItemKind.ENTITLEMENT:
        if change is ChangeKind.INSERT and isinstance(new_item, EntitlementRow) and old_item is None:
            return EntitlementCreated
        if (
            change is ChangeKind.MODIFY
            and isinstance(new_item, EntitlementRow)
            and isinstance(old_item, EntitlementRow)
        ):
            return EntitlementStatusChanged if new_item.status != old_item.status else EntitlementUpdated
        if (
            change is ChangeKind.REMOVE
            and new_item is None
            and (old_item is None or isinstance(old_item, EntitlementRow))
        ):
            return EntitlementRemoved
        return None
    if kind in _CLEANUP_KINDS:
        if change is ChangeKind.INSERT and isinstance(new_item, CleanupRecord) and old_item is None:
            return CleanupScheduled
        if (
            change is ChangeKind.MODIFY
            and isinstance(new_item, CleanupRecord)
            and isinstance(old_item, CleanupRecord)
        ):
            return CleanupUpdated
        if (
            change is ChangeKind.REMOVE
            and new_item is None
            and (old_item is None or isinstance(old_item, CleanupRecord))
        ):
            return CleanupExpired if ttl_deletion else CleanupCancelled
    return None


_EVENT_CLASSES: tuple[type[StreamEvent], ...] = (
    EntitlementCreated,
    EntitlementStatusChanged,
    EntitlementUpdated,
    EntitlementRemoved,
    CleanupScheduled,
    CleanupUpdated,
    CleanupCancelled,
    CleanupExpired,
    UnknownItemChanged,
)
# Each class's own validator: what `model_validate` calls, minus its per-call Python argument checks.
_VALIDATE: dict[type[StreamEvent], Callable[[dict[str, Any]], StreamEvent]] = {
    event_class: event_class.__pydantic_validator__.validate_python for event_class in _EVENT_CLASSES
}

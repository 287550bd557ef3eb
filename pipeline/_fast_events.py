"""The dict fast path of `pipeline.decode`: common, well-formed records typed without pydantic's validator.

`fast_event` takes a parsed stream record and returns the exact event `pipeline.decode`'s validated path
would return for it, or ``None``. ``None`` means "not positively recognised": the caller then runs the
validated path from the start, which alone decides everything else, raises every `DecodeError` and
types every odd record. This function never raises on bad data and never guesses.

What it recognises, each point checked explicitly in plain Python:

- the envelope: a dict record with a non-empty string ``eventID``, an ``eventName`` of INSERT, MODIFY or
  REMOVE, a ``dynamodb`` dict, a sequence number of 1 to 48 ASCII digits (equal to the KCL one when that
  is given), a creation time of integral epoch milliseconds below 2**32 s (adapter shape) or int/float
  epoch seconds or an aware datetime (raw shape), aware UTC; no ``eventSourceARN`` or the stream's own;
  no ``userIdentity`` or a dict naming a string type and/or principal;
- the keys: a dict whose sort key is a string naming a known item kind (an entitlement row, a
  cancellation or a stale record);
- the images the change implies (INSERT: new only; MODIFY: both; REMOVE: old only), each a dict whose
  values decode without error (`pipeline._attribute_values`), with no attribute named ``kind``, with the
  keys' sort key, and whose attributes fit the item's strict model: every required field an exact
  ``str``, every optional one an exact ``str`` or absent or NULL, a cleanup ``ttl`` an exact ``int``,
  a finite ``Decimal`` or a ``str``; any other attribute is an extra, allowed as the models allow it
  (an extra name that is not valid Unicode text, possible only in the raw shape, is left to the
  validated path);
- the stream ARN and shard id the caller gives are exact ``str``.

Everything else returns ``None``: unknown sort keys (`UnknownItemChanged`), an image missing, extra or
of the wrong kind, a REMOVE without its old image (a KEYS_ONLY view), a NULL or non-string required
field, a ``BOOL`` or set ttl, a fractional creation time in the adapter shape or a Decimal one in the
raw shape, a mapping that is not a dict, a value that is not an attribute value, and any value that
does not decode (the validated path then raises its `DecodeError`).

Instances are built as `BaseModel.model_construct` builds them, by `pipeline._instances.new_instance` (a
new object whose ``__dict__``, ``__pydantic_fields_set__``, ``__pydantic_extra__`` and
``__pydantic_private__`` are set), with the state pydantic's validator gives: fields in the model's
order, defaults filled, the fields set naming exactly what the validated path's payload named (the
items' extras included, as pydantic counts them), extras in the image's order, ``{}`` of extras on an
item without any, ``None`` on the events and the position (``extra="forbid"``). `model_construct` itself
is not called on the hot path: it is generic Python that costs more than validating (an entitlement row,
measured: 3.2 us by `model_construct`, 1.3 us by pydantic's validator, 0.2 us by `new_instance`).
tests/pipeline/test_decode_fast_path.py shows that the state is the same as both `model_construct`'s and
the validated path's, for every kind of record.

Speed: adapter records the service writes take the wire path (`pipeline._wire_events`) before this
one, which is faster still; this path serves the raw shape and the adapter records that path leaves
(extras, NULLs, odd ttls). On the bench's records, when forced through it, about 1.8x AWS Lambda
Powertools' DynamoDBStreamModel (the validated path alone: 1.35x): most of what is left is the 3 to 4 us
orjson takes to build the record's dicts, one per attribute value.

The checks assume the models as they are. `FAST_PATH_ENABLED` is computed at import from the models
themselves (field names, order, annotations, requiredness, defaults, constraints, config, validators):
if any of them changes, the fast path turns itself off and every record takes the validated path, until
this module is updated (a test fails meanwhile).
"""

from __future__ import annotations

__all__ = ["FAST_PATH_ENABLED", "build_event", "fast_event"]

import math
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final, Literal

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from pipeline._attribute_values import decode_value
from pipeline._instances import new_instance
from pipeline._record_format import (
    CHANGES,
    EXACT_MILLIS_LIMIT,
    INSERT,
    MODIFY,
    REMOVE,
    TTL_IDENTITY_TYPE,
    TTL_PRINCIPAL,
)
from pipeline.errors import DecodeError
from pipeline.events import (
    SCHEMA_VERSION,
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
    EventType,
    StreamEvent,
    StreamPosition,
)
from schema.table import USER_PK_PREFIX, CleanupRecord, EntitlementRow, ItemKind, UnknownItem, item_kind

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_USER_PK_LENGTH = len(USER_PK_PREFIX)
_ENTITLEMENT = ItemKind.ENTITLEMENT
_UNKNOWN = ItemKind.UNKNOWN
_from_timestamp = datetime.fromtimestamp

# -- the models as the checks below assume them ----------------------------------------------------------

_REQUIRED: Final = PydanticUndefined  # no default
_OPTIONAL_TEXT = str | None
_ITEM_OR_NONE = EntitlementRow | CleanupRecord | UnknownItem | None
_TTL = int | Decimal | str | None
_SEQUENCE_CONSTRAINTS = "[_PydanticGeneralMetadata(pattern='^[0-9]{1,48}$')]"

_ENTITLEMENT_FIELDS: dict[str, tuple[Any, ...]] = {
    "kind": (Literal[ItemKind.ENTITLEMENT], ItemKind.ENTITLEMENT),
    "pk": (str, _REQUIRED),
    "sk": (str, _REQUIRED),
    "userId": (str, _REQUIRED),
    "arrayAccountId": (str, _REQUIRED),
    "status": (str, _REQUIRED),
    "createdAt": (_OPTIONAL_TEXT, None),
    "updatedAt": (_OPTIONAL_TEXT, None),
    "processorToken": (_OPTIONAL_TEXT, None),
    "gsi1pk": (_OPTIONAL_TEXT, None),
    "gsi1sk": (_OPTIONAL_TEXT, None),
}
_CLEANUP_FIELDS: dict[str, tuple[Any, ...]] = {
    "kind": (Literal[ItemKind.CANCELLATION, ItemKind.STALE], _REQUIRED),
    "pk": (str, _REQUIRED),
    "sk": (str, _REQUIRED),
    "userId": (str, _REQUIRED),
    "arrayAccountId": (str, _REQUIRED),
    "ttl": (_TTL, None),
    "createdAt": (_OPTIONAL_TEXT, None),
}
_POSITION_FIELDS: dict[str, tuple[Any, ...]] = {
    "stream_arn": (str, _REQUIRED),
    "shard_id": (str, _REQUIRED),
    "sequence_number": (str, _REQUIRED, _SEQUENCE_CONSTRAINTS),
}


def _event_fields(event_type: EventType, **overrides: tuple[Any, ...]) -> dict[str, tuple[Any, ...]]:
    fields: dict[str, tuple[Any, ...]] = {
        "schema_version": (int, SCHEMA_VERSION),
        "event_type": (Literal[event_type], event_type),
        "event_id": (str, _REQUIRED),
        "change": (ChangeKind, _REQUIRED),
        "position": (StreamPosition, _REQUIRED),
        "created_at": (datetime, _REQUIRED),
        "keys": (dict[str, Any], _REQUIRED),
        "item_kind": (ItemKind, _REQUIRED),
        "user_id": (_OPTIONAL_TEXT, _REQUIRED),
        "ttl_deletion": (bool, False),
        "old_item": (_ITEM_OR_NONE, None),
        "new_item": (_ITEM_OR_NONE, None),
    }
    fields.update(overrides)
    return fields


_ASSUMED: dict[type[BaseModel], tuple[str, dict[str, tuple[Any, ...]]]] = {
    StreamPosition: ("forbid", _POSITION_FIELDS),
    EntitlementRow: ("allow", _ENTITLEMENT_FIELDS),
    CleanupRecord: ("allow", _CLEANUP_FIELDS),
    EntitlementCreated: (
        "forbid",
        _event_fields(EventType.ENTITLEMENT_CREATED, new_item=(EntitlementRow, _REQUIRED)),
    ),
    EntitlementStatusChanged: (
        "forbid",
        _event_fields(
            EventType.ENTITLEMENT_STATUS_CHANGED,
            old_item=(EntitlementRow, _REQUIRED),
            new_item=(EntitlementRow, _REQUIRED),
            from_status=(str, _REQUIRED),
            to_status=(str, _REQUIRED),
        ),
    ),
    EntitlementUpdated: (
        "forbid",
        _event_fields(
            EventType.ENTITLEMENT_UPDATED,
            old_item=(EntitlementRow, _REQUIRED),
            new_item=(EntitlementRow, _REQUIRED),
        ),
    ),
    EntitlementRemoved: (
        "forbid",
        _event_fields(EventType.ENTITLEMENT_REMOVED, old_item=(EntitlementRow | None, _REQUIRED)),
    ),
    CleanupScheduled: (
        "forbid",
        _event_fields(EventType.CLEANUP_SCHEDULED, new_item=(CleanupRecord, _REQUIRED)),
    ),
    CleanupUpdated: (
        "forbid",
        _event_fields(
            EventType.CLEANUP_UPDATED,
            old_item=(CleanupRecord, _REQUIRED),
            new_item=(CleanupRecord, _REQUIRED),
        ),
    ),
    CleanupCancelled: (
        "forbid",
        _event_fields(EventType.CLEANUP_CANCELLED, old_item=(CleanupRecord | None, _REQUIRED)),
    ),
    CleanupExpired: (
        "forbid",
        _event_fields(
            EventType.CLEANUP_EXPIRED,
            ttl_deletion=(Literal[True], True),
            old_item=(CleanupRecord | None, _REQUIRED),
        ),
    ),
}


def _model_matches(cls: type[BaseModel], extra: str, assumed: dict[str, tuple[Any, ...]]) -> bool:
    """Whether `cls` is exactly the model the fast path's checks were written for."""
    config = cls.model_config
    if (
        config.get("strict") is not True
        or config.get("frozen") is not True
        or config.get("extra") != extra
        or cls.__pydantic_root_model__
        or cls.__pydantic_post_init__ is not None
        or cls.__private_attributes__
        or cls.__pydantic_computed_fields__
    ):
        return False
    decorators = cls.__pydantic_decorators__
    if (
        decorators.validators
        or decorators.field_validators
        or decorators.root_validators
        or decorators.model_validators
    ):
        return False
    for klass in cls.__mro__:  # typed extras (an annotated __pydantic_extra__) would be validated
        if klass is not BaseModel and "__pydantic_extra__" in vars(klass).get("__annotations__", {}):
            return False
    fields = cls.model_fields
    if list(fields) != list(assumed):
        return False
    for name, field in fields.items():
        annotation, default, *constraints = assumed[name]  # (annotation, default[, constraints])
        if (
            field.annotation != annotation
            or type(field.default) is not type(default)
            or field.default != default
            or field.default_factory is not None
            or field.alias is not None
            or field.validation_alias is not None
            or field.discriminator is not None
            or repr(field.metadata) != (constraints[0] if constraints else "[]")
        ):
            return False
    return True


def _models_match() -> bool:
    return all(_model_matches(cls, extra, assumed) for cls, (extra, assumed) in _ASSUMED.items())


FAST_PATH_ENABLED: Final = _models_match()

# Templates of the items' __dict__: every field in the model's order, defaults filled (the required
# ones are always overwritten: the checks require them present).
_ENTITLEMENT_TEMPLATE: dict[str, Any] = {name: None for name in _ENTITLEMENT_FIELDS} | {"kind": _ENTITLEMENT}
_CLEANUP_TEMPLATES: dict[ItemKind, dict[str, Any]] = {
    kind: {name: None for name in _CLEANUP_FIELDS} | {"kind": kind}
    for kind in (ItemKind.CANCELLATION, ItemKind.STALE)
}
_ENTITLEMENT_REQUIRED = frozenset(["pk", "sk", "userId", "arrayAccountId", "status"])
_CLEANUP_REQUIRED = frozenset(["pk", "sk", "userId", "arrayAccountId"])
_ENTITLEMENT_FIELD_COUNT = len(_ENTITLEMENT_FIELDS)
_ENTITLEMENT_ATTRIBUTES = _ENTITLEMENT_FIELD_COUNT - 1  # a complete row: every field but `kind`
_ENTITLEMENT_FIELDS_SET = frozenset(_ENTITLEMENT_FIELDS)
_CLEANUP_FIELD_COUNT = len(_CLEANUP_FIELDS)

_BASE_EVENT_FIELDS_SET = frozenset(
    ["event_id", "change", "position", "created_at", "keys", "item_kind", "user_id", "ttl_deletion"]
)
_INSERT_FIELDS_SET = _BASE_EVENT_FIELDS_SET | {"new_item"}
_MODIFY_FIELDS_SET = _BASE_EVENT_FIELDS_SET | {"new_item", "old_item"}
_STATUS_CHANGE_FIELDS_SET = _MODIFY_FIELDS_SET | {"from_status", "to_status"}
_REMOVE_FIELDS_SET = _BASE_EVENT_FIELDS_SET | {"old_item"}
_POSITION_FIELDS_SET = frozenset(_POSITION_FIELDS)


# -- items ----------------------------------------------------------------------------------------------


def _is_text(name: str) -> bool:
    """Whether pydantic can take `name` as an extra's name: valid Unicode (no lone surrogates)."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fill(fields: dict[str, Any], image: dict[Any, Any], adapter: bool) -> bool:
    """Decode `image` into `fields` (a template copy, or {}) as `decode_image` does; whether every
    attribute was an exact string. Raises DecodeError (or AttributeError, on a value without ``get``)
    where `decode_image` would raise: the caller gives up then."""
    if not adapter:  # names parsed from JSON are strings; from a mapping they must be checked
        for name in image:
            if type(name) is not str:
                raise DecodeError("attribute name is not a string")
    plain = True
    for name, av in image.items():
        text = av.get("S")
        if type(text) is str and len(av) == 1:
            fields[name] = text
        else:
            plain = False
            fields[name] = decode_value(av)
    return plain


def _split_extras(fields: dict[str, Any], count: int) -> dict[str, Any] | None:
    """Move what follows the template's `count` fields (the extras, in the image's order) out of
    `fields`; None when an extra's name is one pydantic refuses."""
    if len(fields) == count:
        return {}
    names = list(fields)[count:]
    if not all(_is_text(name) for name in names):
        return None
    return {name: fields.pop(name) for name in names}


def _entitlement_row(image: Any, sort_key: str, adapter: bool) -> EntitlementRow | None:
    """The `EntitlementRow` of an image, or None when the image does not positively fit it."""
    if type(image) is not dict or "kind" in image:  # `parse_item` overrides a "kind" attribute
        return None
    fields = _ENTITLEMENT_TEMPLATE.copy()
    if adapter:  # `_fill`, inlined: the commonest item on the hottest path
        plain = True
        for name, av in image.items():
            text = av.get("S")
            if type(text) is str and len(av) == 1:
                fields[name] = text
            else:
                plain = False
                fields[name] = decode_value(av)
    else:
        plain = _fill(fields, image, adapter)
    if plain and len(image) == _ENTITLEMENT_ATTRIBUTES and len(fields) == _ENTITLEMENT_FIELD_COUNT:
        # The complete row, all strings: as many attributes as fields other than `kind`, none of them
        # an extra (the template did not grow) and none named "kind", so each field is present.
        fields_set: AbstractSet[str] = _ENTITLEMENT_FIELDS_SET
        extra: dict[str, Any] | None = {}
    else:
        if plain:
            if not image.keys() >= _ENTITLEMENT_REQUIRED:
                return None
        elif not (
            type(fields["pk"]) is str
            and type(fields["sk"]) is str
            and type(fields["userId"]) is str
            and type(fields["arrayAccountId"]) is str
            and type(fields["status"]) is str
            and (fields["createdAt"] is None or type(fields["createdAt"]) is str)
            and (fields["updatedAt"] is None or type(fields["updatedAt"]) is str)
            and (fields["processorToken"] is None or type(fields["processorToken"]) is str)
            and (fields["gsi1pk"] is None or type(fields["gsi1pk"]) is str)
            and (fields["gsi1sk"] is None or type(fields["gsi1sk"]) is str)
        ):
            return None
        extra = _split_extras(fields, _ENTITLEMENT_FIELD_COUNT)
        if extra is None:
            return None
        fields_set = set(image)
        fields_set.add("kind")
    if fields["sk"] != sort_key:
        return None
    return new_instance(EntitlementRow, fields, fields_set, extra)


def _cleanup_record(image: Any, sort_key: str, kind: ItemKind, adapter: bool) -> CleanupRecord | None:
    """The `CleanupRecord` of an image, or None when the image does not positively fit it."""
    if type(image) is not dict or "kind" in image:
        return None
    fields = _CLEANUP_TEMPLATES[kind].copy()
    if _fill(fields, image, adapter):
        if not image.keys() >= _CLEANUP_REQUIRED:  # every present value is an exact str
            return None
    else:
        ttl = fields["ttl"]
        created_at = fields["createdAt"]
        if not (
            type(fields["pk"]) is str
            and type(fields["sk"]) is str
            and type(fields["userId"]) is str
            and type(fields["arrayAccountId"]) is str
            and (
                ttl is None
                or type(ttl) is int
                or type(ttl) is str
                or (type(ttl) is Decimal and ttl.is_finite())
            )
            and (created_at is None or type(created_at) is str)
        ):
            return None
    if fields["sk"] != sort_key:
        return None
    extra = _split_extras(fields, _CLEANUP_FIELD_COUNT)
    if extra is None:
        return None
    fields_set = set(image)
    fields_set.add("kind")
    return new_instance(CleanupRecord, fields, fields_set, extra)


# -- events ---------------------------------------------------------------------------------------------


def _seconds(value: Any) -> datetime | None:
    """The raw shape's creation time, as `pipeline.decode` reads it, when it is an int, a finite float
    or an aware datetime; else None."""
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        try:
            return _EPOCH + timedelta(seconds=value)
        except OverflowError:
            return None
    if type(value) is datetime and value.tzinfo is not None and value.utcoffset() is not None:
        return value.astimezone(UTC)
    return None


def fast_event(  # noqa: PLR0915 (one function: on this path a call costs ~0.1 us, 1% of a record)
    record: Any, stream_arn: str, shard_id: str, read_at: str | None, adapter: bool
) -> StreamEvent | None:
    """The event the validated path gives for `record`, or None when the record is not one the fast
    path positively recognises (see the module). Never raises on bad data.

    `read_at`: the KCL record's sequence number, or None. `adapter`: the KCL adapter's shape (epoch
    milliseconds, parsed from JSON), else the raw GetRecords / Lambda shape.
    """
    try:
        if type(record) is not dict or type(stream_arn) is not str or type(shard_id) is not str:
            return None
        event_id = record.get("eventID")
        event_name = record.get("eventName")
        ddb = record.get("dynamodb")
        if type(event_id) is not str or not event_id or type(event_name) is not str or type(ddb) is not dict:
            return None
        change = CHANGES.get(event_name)
        if change is None:
            return None

        sequence = ddb.get("SequenceNumber")
        if sequence is None:
            sequence = read_at
        if not (
            type(sequence) is str
            and 0 < len(sequence) <= SEQUENCE_WIDTH
            and sequence.isdigit()
            and sequence.isascii()
        ) or (read_at is not None and sequence != read_at):
            return None

        created = ddb.get("ApproximateCreationDateTime")
        if adapter:
            if type(created) is not int or not 0 <= created < EXACT_MILLIS_LIMIT:
                return None
            # As `pipeline.decode` computes it (exact below 2**32 s).
            created_at: datetime | None = _from_timestamp(created / 1000, UTC)
        else:
            created_at = _seconds(created)
        if type(created_at) is not datetime or created_at.tzinfo is not UTC:
            return None

        source_arn = record.get("eventSourceARN")
        if source_arn is not None and source_arn != stream_arn:
            return None

        identity = record.get("userIdentity")
        if identity is None:
            ttl_deletion = False
        else:
            if type(identity) is not dict:
                return None
            identity_type = identity.get("type", identity.get("Type"))
            principal = identity.get("principalId", identity.get("PrincipalId"))
            if (identity_type is None and principal is None) or (
                (identity_type is not None and type(identity_type) is not str)
                or (principal is not None and type(principal) is not str)
            ):
                return None
            ttl_deletion = (
                identity_type == TTL_IDENTITY_TYPE and principal == TTL_PRINCIPAL and change is REMOVE
            )

        keys_av = ddb.get("Keys")
        if type(keys_av) is not dict:
            return None
        keys: dict[str, Any] = {}
        _fill(keys, keys_av, adapter)
        sort_key = keys.get("sk")
        kind = item_kind(sort_key)
        if kind is _UNKNOWN:
            return None
        assert type(sort_key) is str  # what a known kind implies

        # The adapter writes an absent image as {}: an empty (or otherwise false) image is no image.
        new_av = ddb.get("NewImage") or None
        old_av = ddb.get("OldImage") or None
        if change is MODIFY:
            if new_av is None or old_av is None:
                return None
        elif change is INSERT:
            if new_av is None or old_av is not None:
                return None
        elif new_av is not None or old_av is None:  # REMOVE: the old image only (see the module)
            return None
        new_item: EntitlementRow | CleanupRecord | None = None
        old_item: EntitlementRow | CleanupRecord | None = None
        if kind is _ENTITLEMENT:
            if new_av is not None and (new_item := _entitlement_row(new_av, sort_key, adapter)) is None:
                return None
            if old_av is not None and (old_item := _entitlement_row(old_av, sort_key, adapter)) is None:
                return None
        else:
            if new_av is not None and (new_item := _cleanup_record(new_av, sort_key, kind, adapter)) is None:
                return None
            if old_av is not None and (old_item := _cleanup_record(old_av, sort_key, kind, adapter)) is None:
                return None

        return build_event(
            change, kind, event_id, sequence, created_at, keys, new_item, old_item, ttl_deletion,
            stream_arn, shard_id,
        )  # fmt: skip
    except (DecodeError, AttributeError, TypeError, ValueError, KeyError):
        return None  # the validated path decides, and raises what it raises


def build_event(  # noqa: PLR0917 (the parts of one event; a keyword call costs 50 ns more)
    change: ChangeKind,
    kind: ItemKind,
    event_id: str,
    sequence: str,
    created_at: datetime,
    keys: dict[str, Any],
    new_item: EntitlementRow | CleanupRecord | None,
    old_item: EntitlementRow | CleanupRecord | None,
    ttl_deletion: bool,
    stream_arn: str,
    shard_id: str,
) -> StreamEvent:
    """The event of a checked record of a known item kind whose images the change implies, built as
    the validated path would build it (the class its change and statuses select, the user from the items
    or the partition key)."""
    # The user: the item's userId (new image first), else what follows USER# in the partition key.
    user_id = new_item.userId if new_item is not None else None
    if not user_id and old_item is not None:
        user_id = old_item.userId
    if not user_id:
        pk = keys.get("pk")
        if type(pk) is str and pk.startswith(USER_PK_PREFIX) and len(pk) > _USER_PK_LENGTH:
            user_id = pk[_USER_PK_LENGTH:]
        else:
            user_id = None

    position = new_instance(
        StreamPosition,
        {"stream_arn": stream_arn, "shard_id": shard_id, "sequence_number": sequence},
        _POSITION_FIELDS_SET,
        None,
    )
    if change is MODIFY:
        fields_set = _MODIFY_FIELDS_SET
        if kind is not _ENTITLEMENT:
            event_class: type[StreamEvent] = CleanupUpdated
        elif new_item.status != old_item.status:  # type: ignore[union-attr]
            event_class = EntitlementStatusChanged
            fields_set = _STATUS_CHANGE_FIELDS_SET
        else:
            event_class = EntitlementUpdated
    elif change is INSERT:
        fields_set = _INSERT_FIELDS_SET
        event_class = EntitlementCreated if kind is _ENTITLEMENT else CleanupScheduled
    else:
        fields_set = _REMOVE_FIELDS_SET
        if kind is _ENTITLEMENT:
            event_class = EntitlementRemoved
        else:
            event_class = CleanupExpired if ttl_deletion else CleanupCancelled
    values: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "event_type": _EVENT_TYPES[event_class],
        "event_id": event_id,
        "change": change,
        "position": position,
        "created_at": created_at,
        "keys": keys,
        "item_kind": kind,
        "user_id": user_id,
        "ttl_deletion": ttl_deletion,
        "old_item": old_item,
        "new_item": new_item,
    }
    if event_class is EntitlementStatusChanged:
        values["from_status"] = old_item.status  # type: ignore[union-attr]
        values["to_status"] = new_item.status  # type: ignore[union-attr]
    return new_instance(event_class, values, fields_set, None)


_EVENT_TYPES: dict[type[StreamEvent], EventType] = {
    cls: cls.model_fields["event_type"].default for cls in _ASSUMED if issubclass(cls, StreamEvent)
}

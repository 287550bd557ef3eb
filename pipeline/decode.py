"""DynamoDB stream records to typed events (`pipeline.events`), in both shapes records arrive in.

- `decode_record`: the KCL adapter's shape. The multilang record's data is the JSON of the whole stream
  record; ``ApproximateCreationDateTime`` is epoch **milliseconds** and ``userIdentity`` has lowercase
  keys (``principalId``, ``type``). This is the consumer's hot path: bytes in, event out.
- `decode_stream_record`: the raw GetRecords / Lambda shape, already parsed into a mapping.
  ``ApproximateCreationDateTime`` is epoch **seconds** (an int or float, or an aware datetime when boto3
  parsed it); ``userIdentity`` is ``PrincipalId``/``Type`` from GetRecords, lowercase in Lambda events.
  Both casings are read in both shapes: mistaking a TTL deletion for a cancellation would leave an
  Array account with no cleanup.

One decoder. Every record is read into the envelope Structs below (`_record_shape`: the one statement of
the stream record's envelope) and finished by `_event`: one set of envelope rules, one user-id rule, one
TTL-identity rule, items typed by `schema.table.parse_item` and one classification (`_classify`):

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
guard/idempotency  any                          UnknownItemChanged, its item_kind and images typed
anything else                                   UnknownItemChanged
=================  ===========================  ============================================================

The guard (`#GUARD`) and idempotency (`IDEMPOTENCY#<digest>`) items are the service's own bookkeeping
(docs/table.md): they carry no entitlement or cleanup meaning, so nothing acts on them, yet they are
known: their events name their kind (`guard`, `idempotency`, never `unknown`) and their images are typed
(`GuardItem`, `IdempotencyRecord`). A TTL removal of an idempotency record is not a cleanup's.

The kind is read from the sort key in ``Keys`` (`schema.table.item_kind`). "Anything else" includes an
unknown sort key and a known key whose image does not fit its item class (what `parse_item` returns as
`UnknownItem`): such records are typed as unknown, never refused. A new attribute or an unknown status
never raises. The TTL identity is ``userIdentity`` type ``Service`` with principal
``dynamodb.amazonaws.com``; ``ttl_deletion`` is set on every REMOVE that carries it.

Two branches reach `_event`, inside `decode_record`:

- typed: msgspec decodes the bytes straight into the envelope Structs with images of the wire shape
  `_WireImage`, which is *derived* from the item Structs (each declared attribute an ``{"S": ...}``, or
  ``{"N": ...}`` where the item takes a number; no other attribute). Every record the service writes
  takes it: no dict per attribute value, every type checked in C.
- generic: anything the wire shape cannot express (an extra attribute, a NULL, a string ttl, an unknown
  item, another type of key, or a record that is not valid at all) is parsed by orjson into the same
  envelope Structs with the images left as parsed, and each image is decoded by the one strict
  attribute-value decoder (`pipeline._attribute_values`). The raw shape always takes this branch.

What is refused, with `DecodeError` (a `TerminalError`), and only that: a record that is not the stream
record's shape (not JSON, invalid UTF-8 or a lone surrogate anywhere, nested beyond what a JSON parser
takes, no eventID, an unknown eventName, no ``dynamodb`` section, no or a malformed sequence number or
creation time or one out of range, no ``Keys``, an envelope field of the wrong type, ``eventVersion``,
``eventSource`` and ``awsRegion`` included), any malformed attribute value (see
`pipeline._attribute_values`: nesting, the 38-digit rule, base64, sets), a ``userIdentity`` that names
neither type nor principal, a string that is not valid Unicode text (a lone surrogate, which only a
raw-shape mapping can hold: in an attribute name or value or an envelope field), and a record that names
another stream or another sequence number than the one it was read at. So every event returned can be
written as UTF-8 (the lake, the journal) and its raw record parked. The error's message names the reason
only; its context holds the shard, and the sequence number and event id where they could be read.

tests/pipeline/test_decode_branches.py holds the typed branch to the generic one, and
tests/pipeline/test_decode_fuzz.py holds both to a reference reading over mutated records.
"""

from __future__ import annotations

__all__ = ["DecodeError", "KinesisSource", "decode_export_item", "decode_record", "decode_stream_record"]

import math
import operator
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Final

import msgspec
import orjson
from msgspec import UNSET, Struct, UnsetType

from pipeline._attribute_values import decode_image, parse_number
from pipeline._kinesis_envelope import (
    KinesisSource,
    is_kinesis_envelope,
    is_kinesis_sequence,
    read_kinesis_envelope,
)
from pipeline.errors import DecodeError
from pipeline.events import (
    SEQUENCE_RULE,
    ChangeKind,
    CleanupCancelled,
    CleanupExpired,
    CleanupScheduled,
    CleanupUpdated,
    EntitlementCreated,
    EntitlementRemoved,
    EntitlementStatusChanged,
    EntitlementUpdated,
    ItemExported,
    StreamEvent,
    StreamPosition,
    UnknownItemChanged,
    is_sequence_number,
)
from schema.errors import RecordContext
from schema.table import (
    ITEM_FIELDS,
    SK,
    USER_PK_PREFIX,
    CleanupRecord,
    EntitlementRow,
    GuardItem,
    IdempotencyRecord,
    Item,
    ItemKind,
    UnknownItem,
    item_class,
    item_kind,
    parse_item,
)

# The identity DynamoDB's TTL gives the REMOVE records of the items it expires.
TTL_IDENTITY_TYPE: Final = "Service"
TTL_PRINCIPAL: Final = "dynamodb.amazonaws.com"
# Members as module globals: compared with `is`, and a member lookup on the class costs ~70 ns.
_INSERT: Final = ChangeKind.INSERT
_MODIFY: Final = ChangeKind.MODIFY
_REMOVE: Final = ChangeKind.REMOVE
_CHANGES: Final = {"INSERT": _INSERT, "MODIFY": _MODIFY, "REMOVE": _REMOVE}
# Creation times in epoch milliseconds below this (2**32 s) convert exactly through a float: its error is
# under half a microsecond there and `datetime.fromtimestamp` rounds to the microsecond.
_EXACT_MILLIS_LIMIT: Final = 2**32 * 1000
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_FROM_TIMESTAMP: Final = datetime.fromtimestamp  # bound once: a class attribute lookup per record saved
_USER_PK_LENGTH: Final = len(USER_PK_PREFIX)
_MAX_EVENT_ID_IN_CONTEXT: Final = 128
# A consumer of a Kinesis stream reads only Kinesis's envelope: a record without it (no recordFormat, no
# tableName) would otherwise be read as a DynamoDB stream record at the Kinesis sequence number.
_NOT_KINESIS: Final = "not a Kinesis record (no recordFormat or tableName), and the source is Kinesis"


# -- the shapes -----------------------------------------------------------------------------------------


class _S(Struct, frozen=True, gc=False, forbid_unknown_fields=True, rename={"value": "S"}):
    value: str


class _N(Struct, frozen=True, gc=False, forbid_unknown_fields=True, rename={"value": "N"}):
    value: str


def _wire_value(accepted: tuple[type, ...]) -> type[_S] | type[_N]:
    """The attribute value the service writes for an item field: a Number where it takes an int."""
    return _N if int in accepted else _S


# The item classes the service writes (its own guard and idempotency records among them: every guarded
# write's transaction changes the guard, so a live stream holds about as many guard changes as row
# changes, and these took the generic branch).
_WRITTEN: Final = (EntitlementRow, CleanupRecord, GuardItem, IdempotencyRecord)
# The wire image, derived from the item Structs: every attribute those classes declare, as the service
# writes it, and nothing else (`forbid_unknown_fields`): anything more takes the generic branch.
_WIRE_ATTRIBUTES: Final = {
    name: _wire_value(accepted) for cls in _WRITTEN for name, (accepted, _) in ITEM_FIELDS[cls].items()
}
# One attribute name, one wire type, whichever class declares it (a Number `ttl` in both that have one).
assert all(
    _wire_value(accepted) is _WIRE_ATTRIBUTES[name]
    for cls in _WRITTEN
    for name, (accepted, _) in ITEM_FIELDS[cls].items()
), "an attribute's wire type differs between item classes"
_WIRE_NAMES: Final = tuple(_WIRE_ATTRIBUTES)
_WIRE_NUMBERS: Final = tuple(name for name, value in _WIRE_ATTRIBUTES.items() if value is _N)
_WireImage = msgspec.defstruct(
    "_WireImage",
    [(name, value | UnsetType, UNSET) for name, value in _WIRE_ATTRIBUTES.items()],
    frozen=True,
    gc=False,
    forbid_unknown_fields=True,
)


def _record_shape(name: str, *, image: Any, keys: Any, created: Any, typed: bool) -> Any:
    """The stream record's envelope, with the images, the keys and the creation time as given: the wire
    types in the typed branch, any parsed value in the generic one (checked by `_event` and
    `decode_image`). Fields no event reads are typed too (a wrong type is a bad record).

    The typed branch takes no field beyond these (`forbid_unknown_fields`): msgspec skips an unknown
    field's value unread, where orjson checks it (a number out of range, say), so such a record takes
    the generic branch, which refuses it when it must."""
    identity = msgspec.defstruct(
        f"{name}Identity",
        # Either casing is read (see `_event`).
        [(field, str | UnsetType | None, UNSET) for field in ("type", "principalId", "Type", "PrincipalId")],
        frozen=True,
        gc=False,
        forbid_unknown_fields=typed,
    )
    change = msgspec.defstruct(
        f"{name}Change",
        [
            ("ApproximateCreationDateTime", created),
            ("Keys", keys),
            ("SequenceNumber", str | UnsetType, UNSET),
            ("NewImage", image, UNSET),
            ("OldImage", image, UNSET),
            ("SizeBytes", Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] | UnsetType, UNSET),
            ("StreamViewType", str | UnsetType, UNSET),
        ],
        frozen=True,
        gc=False,
        forbid_unknown_fields=typed,
    )
    return msgspec.defstruct(
        f"{name}Record",
        [
            ("eventID", str),
            ("eventName", str),
            ("dynamodb", change),
            ("userIdentity", identity | UnsetType | None, UNSET),
            ("eventSourceARN", str | UnsetType, UNSET),
            ("eventVersion", str | UnsetType, UNSET),
            ("eventSource", str | UnsetType, UNSET),
            ("awsRegion", str | UnsetType, UNSET),
        ],
        frozen=True,
        gc=False,
        forbid_unknown_fields=typed,
    )


_TypedRecord = _record_shape(
    "_Typed", image=_WireImage | UnsetType, keys=dict[str, _S], created=int, typed=True
)
_GenericRecord = _record_shape("_Generic", image=Any, keys=Any, created=Any, typed=False)
_decode_typed = msgspec.json.Decoder(_TypedRecord).decode


# -- public entry points --------------------------------------------------------------------------------


def decode_record(
    data: bytes,
    *,
    stream_arn: str,
    shard_id: str,
    sequence_number: str | None = None,
    kinesis: KinesisSource | None = None,
) -> StreamEvent:
    """One KCL adapter record (the JSON of a whole stream record) to its typed event.

    `sequence_number` is the KCL record's sequence number; when given, the stream record's own
    ``SequenceNumber`` must equal it (the adapter sets one from the other).

    A Kinesis Data Streams record (its envelope named by recordFormat/tableName) is read through
    `pipeline._kinesis_envelope` into the same events, its position's sequence number its change key
    (`pipeline._kinesis_envelope.change_key`); `kinesis` is the configured source: without it such a
    record is refused, and with it any other record is.
    """
    record: Any = None
    kinesis_record: dict[str, Any] | None = None
    try:
        try:
            record = _decode_typed(data)
        except (msgspec.MsgspecError, RecursionError):
            record = None
        if record is not None:  # the typed branch
            if kinesis is not None:
                raise DecodeError(_NOT_KINESIS)
            ddb = record.dynamodb
            keys = {name: value.value for name, value in ddb.Keys.items()}
            new, old = _typed_item("NewImage", ddb.NewImage), _typed_item("OldImage", ddb.OldImage)
            return _event(
                record, keys, new, old,
                stream_arn=stream_arn, shard_id=shard_id, read_at=sequence_number, adapter=True,
            )  # fmt: skip
        try:  # the generic branch
            record = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise DecodeError("record is not valid JSON") from None
        if type(record) is dict and is_kinesis_envelope(record):
            # Its time is read there, made aware; its position's sequence number is its change key.
            kinesis_record = record
            mapped = read_kinesis_envelope(
                record, source=kinesis, shard_id=shard_id, sequence_number=sequence_number
            )
            return _generic(mapped, stream_arn, shard_id, None, adapter=False)
        if kinesis is not None:
            raise DecodeError(_NOT_KINESIS)
        return _generic(record, stream_arn, shard_id, sequence_number, adapter=True)
    except DecodeError as error:
        if kinesis_record is not None:  # where it sits is the Kinesis record's sequence number
            context = _kinesis_context(kinesis_record, shard_id, sequence_number)
        else:
            context = _context(record, shard_id, sequence_number)
        raise DecodeError(error.reason, context=context) from None
    except RecursionError:
        raise DecodeError("record nests too deeply", context=_context(None, shard_id, None)) from None


def decode_stream_record(record: Mapping[str, Any], *, stream_arn: str, shard_id: str) -> StreamEvent:
    """One raw stream record (GetRecords via boto3, or a Lambda event's record) to its typed event."""
    try:
        if not isinstance(record, Mapping):
            raise DecodeError("record is not an object")
        return _generic(dict(record), stream_arn, shard_id, None, adapter=False)
    except DecodeError as error:
        raise DecodeError(error.reason, context=_context(record, shard_id, None)) from None
    except RecursionError:
        raise DecodeError("record nests too deeply", context=_context(None, shard_id, None)) from None


_KEY_NAMES: Final = ("pk", "sk")


def decode_export_item(
    line: bytes,
    *,
    export_arn: str,
    data_file: str,
    sequence_number: str,
    exported_at: datetime,
    event_id: str,
) -> ItemExported:
    """One line of a DynamoDB-JSON export data file (``{"Item": {...}}``) to an `ItemExported` event.

    The item is read by the same strict attribute-value decoder as a stream image (every type exact:
    numbers to 38 digits, base64 binary, sets) and typed by `schema.table.parse_item`; the user and the
    kind follow the stream's rules. `export_arn`, `data_file` and `sequence_number` are the event's
    position (its identity in the lake); `exported_at` (aware) its time; `event_id` names it (no key or
    other personal data). Refused with `DecodeError`: a line that is not JSON, not an object holding
    exactly ``Item``, an item without a string ``pk`` and ``sk``, a malformed attribute value, or a
    sequence number that breaks the one rule. The error names the reason only."""
    context = RecordContext(shard_id=data_file, event_id=event_id[:_MAX_EVENT_ID_IN_CONTEXT])
    try:
        if not is_sequence_number(sequence_number):
            raise DecodeError(f"sequence number is not {SEQUENCE_RULE}")
        if exported_at.tzinfo is None:
            raise DecodeError("export time is not timezone-aware")
        try:
            parsed = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise DecodeError("export line is not valid JSON") from None
        if type(parsed) is not dict or set(parsed) != {"Item"} or type(parsed["Item"]) is not dict:
            raise DecodeError("export line is not an object holding exactly Item")
        image = _image("Item", parsed["Item"], True)
        if image is None:
            raise DecodeError("Item is empty")
        keys = {name: image.get(name) for name in _KEY_NAMES}
        if any(type(value) is not str or not value for value in keys.values()):
            raise DecodeError("Item has no string pk and sk")
        item = parse_item(image)
        position = StreamPosition(stream_arn=export_arn, shard_id=data_file, sequence_number=sequence_number)
        return ItemExported(
            event_id=event_id, position=position, created_at=exported_at.astimezone(UTC), keys=keys,
            item_kind=item_kind(keys["sk"]), user_id=_user_id(keys, item, None), new_item=item,
        )  # fmt: skip
    except DecodeError as error:
        raise DecodeError(error.reason, context=context) from None
    except RecursionError:
        raise DecodeError("export line nests too deeply", context=context) from None


# -- the branches ---------------------------------------------------------------------------------------


def _attributes_getter(names: tuple[str, ...]) -> Any:
    """A getter of the named attributes that gives a tuple whatever their number (an attrgetter of one
    name gives the value itself): each name read once, as the builder runs per image."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    return lambda image: tuple(getattr(image, name) for name in names)


def _builder(cls: type[EntitlementRow | CleanupRecord | GuardItem | IdempotencyRecord]) -> tuple[Any, ...]:
    """How the typed branch builds `cls` from a wire image holding exactly `cls`'s attributes (what the
    service writes), derived from `cls`'s fields: a getter of their values (AttributeError when one is
    absent), a getter of every other wire attribute with what it gives when those are all absent, the
    positions of the numbers, and whether `kind` leads the positional arguments (it has no default)."""
    names = tuple(ITEM_FIELDS[cls])
    others = tuple(name for name in _WIRE_NAMES if name not in names)
    order = [field.name for field in msgspec.structs.fields(cls)]
    kind_first = order[0] == "kind"
    assert order[kind_first : kind_first + len(names)] == list(names), "declared attributes lead the fields"
    if not kind_first:  # then its one kind is the default, and built positionally it takes that
        default = next(field.default for field in msgspec.structs.fields(cls) if field.name == "kind")
        assert item_class(default) is cls, "a class built without its kind has that kind by default"
    return (
        cls,
        operator.attrgetter(*(f"{name}.value" for name in names)),
        _attributes_getter(others),
        (UNSET,) * len(others),
        tuple(index for index, name in enumerate(names) if _WIRE_ATTRIBUTES[name] is _N),
        kind_first,
    )


# The kinds whose changes have a business meaning (`_classify`); the service's own items (guard,
# idempotency) are typed by `parse_item` but classified as changes of no entitlement or cleanup.
_ITEM_CLASS: Final[dict[ItemKind, Any]] = {
    kind: cls
    for kind in ItemKind
    if (cls := item_class(kind)) is not None and cls in (EntitlementRow, CleanupRecord)
}
# Each written class's builder, by the kind whose sort key names that class: one lookup per image (a
# lookup by class first needed `item_class`, a call per image).
_BUILDERS: Final[dict[ItemKind, tuple[Any, ...]]] = {
    kind: builder
    for cls in _WRITTEN
    for builder in [_builder(cls)]
    for kind in ItemKind
    if item_class(kind) is cls
}
# The image the adapter writes for the side a change does not have (`{}`): every attribute absent.
_ABSENT_IMAGE: Final = _WireImage()
_SORT_KEY: Final = operator.attrgetter(SK)


def _typed_item(section: str, image: Any) -> Item | None:
    """The item of a typed image: built directly when it holds exactly the attributes of the class its
    sort key names (every value's type is then the wire shape's, derived from that class), else through
    `parse_item`, as the generic branch does. A number that is not one names its section, as there."""
    if image is UNSET or image == _ABSENT_IMAGE:  # the adapter writes an absent image as {}
        return None
    try:
        sort_key = _SORT_KEY(image)
        if sort_key is not UNSET:
            kind = item_kind(sort_key.value)
            builder = _BUILDERS.get(kind)
            if builder is not None:
                cls, values, others, absent, numbers, kind_first = builder
                try:
                    fields = values(image)
                except AttributeError:  # one of its attributes is absent: `parse_item` decides
                    fields = None
                if fields is not None and others(image) == absent:
                    if numbers:
                        fields = list(fields)
                        for index in numbers:
                            fields[index] = parse_number(fields[index])
                    build: Any = cls
                    return build(kind, *fields) if kind_first else build(*fields)  # type: ignore[no-any-return]
        out = {}
        for name, value in zip(_WIRE_NAMES, msgspec.structs.astuple(image), strict=True):
            if value is not UNSET:
                out[name] = parse_number(value.value) if name in _WIRE_NUMBERS else value.value
    except DecodeError as error:
        raise DecodeError(f"{section}: {error.reason}") from None
    return parse_item(out) if out else None  # the adapter writes an absent image as {}


def _generic(
    parsed: Any, stream_arn: str, shard_id: str, read_at: str | None, *, adapter: bool
) -> StreamEvent:
    try:
        record = msgspec.convert(parsed, _GenericRecord, strict=True)
    except msgspec.ValidationError as error:
        raise DecodeError(_shape_reason(str(error), adapter)) from None
    except UnicodeEncodeError:  # a field name of a mapping that is not valid text (a lone surrogate)
        raise DecodeError("a field name is not valid Unicode text") from None
    ddb = record.dynamodb
    if ddb.Keys is UNSET or ddb.Keys is None:
        raise DecodeError("Keys is missing")
    names_are_text = adapter  # JSON object keys are always text; a mapping's may be anything
    keys = _image("Keys", ddb.Keys, names_are_text)
    if keys is None:
        keys = {}
    new = _image("NewImage", ddb.NewImage, names_are_text)
    old = _image("OldImage", ddb.OldImage, names_are_text)
    if not adapter:  # only a mapping can hold a lone surrogate: JSON parsers refuse them
        _check_text(
            (record.eventID, record.eventVersion, record.eventSource, record.awsRegion, record.userIdentity,
             ddb.StreamViewType, keys, new, old)
        )  # fmt: skip
    new_item = None if new is None else parse_item(new)
    old_item = None if old is None else parse_item(old)
    return _event(
        record, keys, new_item, old_item,
        stream_arn=stream_arn, shard_id=shard_id, read_at=read_at, adapter=adapter,
    )  # fmt: skip


def _image(section: str, image: Any, names_are_text: bool) -> dict[str, Any] | None:
    # The adapter writes an absent image as {}; no stored item is empty (it holds at least its keys), so
    # an empty image always means "no image". Each image names its section in an error.
    if image is UNSET or image is None or (type(image) is dict and not image):
        return None
    try:
        return decode_image(image, names_are_text=names_are_text)
    except DecodeError as error:
        raise DecodeError(f"{section}: {error.reason}") from None


_SHAPE_AT = re.compile(r" - at `\$((?:\.\w+)*)`$")
_SHAPE_MISSING = re.compile(r"missing required field `(\w+)`")
_SHAPE_REASONS: Final = {
    "": "record is not a JSON object",
    ".eventID": "eventID is missing or not a string",
    ".eventName": "eventName is not INSERT, MODIFY or REMOVE",
    ".dynamodb": "dynamodb section is missing or not an object",
    ".dynamodb.Keys": "Keys is missing",
    ".dynamodb.SequenceNumber": f"SequenceNumber is not {SEQUENCE_RULE}",
    ".dynamodb.ApproximateCreationDateTime": "ApproximateCreationDateTime is missing or not a number",
    ".userIdentity": "userIdentity is not an object",
}


def _shape_reason(message: str, adapter: bool) -> str:
    """The reason for a record the envelope shape refuses. msgspec's message names envelope fields only
    (the images and keys are not typed at this point), never a value."""
    at = _SHAPE_AT.search(message)
    missing = _SHAPE_MISSING.search(message)
    path = (at.group(1) if at else "") + (f".{missing.group(1)}" if missing else "")
    if path.startswith(".userIdentity."):
        return "userIdentity type or principal is not a string"
    reason = _SHAPE_REASONS.get(path)
    if reason is None:
        return f"{path.rsplit('.', 1)[-1]} is not of the stream record's type"
    if not adapter and path == "":
        return "record is not an object"
    return reason


def _check_text(value: Any) -> None:
    """Refuse any string in `value` (recursively, names included) that is not valid Unicode text."""
    if type(value) is str:
        if not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError:
                raise DecodeError("a string is not valid Unicode text") from None
    elif isinstance(value, dict):
        for name, member in value.items():
            try:
                _check_text(name)
            except DecodeError:
                raise DecodeError("an attribute name is not valid Unicode text") from None
            _check_text(member)
    elif isinstance(value, list | tuple | frozenset):
        for member in value:
            _check_text(member)
    elif isinstance(value, Struct):  # the identity
        _check_text(msgspec.structs.astuple(value))


# -- the envelope and the event -------------------------------------------------------------------------


def _event(
    record: Any,
    keys: dict[str, Any],
    new_item: Item | None,
    old_item: Item | None,
    *,
    stream_arn: str,
    shard_id: str,
    read_at: str | None,
    adapter: bool,
) -> StreamEvent:
    """The one core both branches and both shapes end in. `adapter`: epoch milliseconds."""
    event_id = record.eventID
    if not event_id:
        raise DecodeError("eventID is missing or not a string")
    change = _CHANGES.get(record.eventName)
    if change is None:
        raise DecodeError("eventName is not INSERT, MODIFY or REMOVE")
    ddb = record.dynamodb

    sequence = ddb.SequenceNumber
    if sequence is UNSET:
        if read_at is None:
            raise DecodeError("SequenceNumber is missing")
        sequence = read_at
    if not is_sequence_number(sequence):
        raise DecodeError(f"SequenceNumber is not {SEQUENCE_RULE}")
    if read_at is not None and sequence != read_at:
        raise DecodeError("SequenceNumber differs from the sequence number the record was read at")

    created = ddb.ApproximateCreationDateTime
    if adapter and type(created) is int and 0 <= created < _EXACT_MILLIS_LIMIT:
        # Exact: a whole millisecond comes back whole (see `_EXACT_MILLIS_LIMIT`).
        created_at = _FROM_TIMESTAMP(created / 1000, UTC)
    else:
        created_at = _from_millis(created) if adapter else _from_seconds(created)

    source_arn = record.eventSourceARN
    if source_arn is not UNSET and source_arn != stream_arn:
        raise DecodeError("eventSourceARN names another stream than the one being read")

    identity = record.userIdentity
    ttl_deletion = False
    if identity is not UNSET and identity is not None:
        # Either casing, the first one given (null is not given).
        kind_ = identity.type if type(identity.type) is str else identity.Type
        principal = identity.principalId if type(identity.principalId) is str else identity.PrincipalId
        if type(kind_) is not str and type(principal) is not str:
            raise DecodeError("userIdentity names neither a type nor a principal")
        ttl_deletion = change is _REMOVE and kind_ == TTL_IDENTITY_TYPE and principal == TTL_PRINCIPAL

    user_id = _user_id(keys, new_item, old_item)
    kind = item_kind(keys.get("sk"))
    event_class = _classify(kind, change, new_item, old_item, ttl_deletion)
    position = StreamPosition(stream_arn=stream_arn, shard_id=shard_id, sequence_number=sequence)
    if event_class is EntitlementStatusChanged:
        rows: Any = (old_item, new_item)  # both entitlement rows (`_classify`)
        return EntitlementStatusChanged(
            event_id=event_id, change=change, position=position, created_at=created_at, keys=keys,
            item_kind=kind, user_id=user_id, ttl_deletion=ttl_deletion, old_item=rows[0],
            new_item=rows[1], from_status=rows[0].status, to_status=rows[1].status,
        )  # fmt: skip
    return event_class(
        event_id=event_id, change=change, position=position, created_at=created_at, keys=keys,
        item_kind=kind, user_id=user_id, ttl_deletion=ttl_deletion, old_item=old_item, new_item=new_item,
    )  # fmt: skip


# The item classes that declare userId: read straight from the item, without `_user_of`'s call.
_WITH_USER_ID: Final = frozenset([EntitlementRow, CleanupRecord, GuardItem, IdempotencyRecord])


def _user_id(keys: dict[str, Any], new_item: Item | None, old_item: Item | None) -> str | None:
    """The one user-id rule: the item's userId (new image first), else what follows USER# in the
    partition key."""
    new: Any = new_item  # a class in `_WITH_USER_ID` has userId (which `in` does not narrow for mypy)
    user_id = new.userId if type(new) in _WITH_USER_ID else _user_of(new)
    if type(user_id) is not str or not user_id:
        old: Any = old_item
        user_id = old.userId if type(old) in _WITH_USER_ID else _user_of(old)
    if type(user_id) is not str or not user_id:
        pk = keys.get("pk")
        if type(pk) is str and pk.startswith(USER_PK_PREFIX) and len(pk) > _USER_PK_LENGTH:
            return pk[_USER_PK_LENGTH:]
        return None
    return user_id


def _user_of(item: Item | None) -> Any:
    if item is None:
        return None
    return item.extra.get("userId") if isinstance(item, UnknownItem) else item.userId


def _classify(
    kind: ItemKind, change: ChangeKind, new_item: Item | None, old_item: Item | None, ttl_deletion: bool
) -> type[StreamEvent]:
    """The event class of a change (see the module's table): the images must be the ones the change
    implies (INSERT: new only; MODIFY: both; REMOVE: old, if any) and of the kind's item class."""
    cls = _ITEM_CLASS.get(kind)
    if cls is None:
        return UnknownItemChanged
    new_fits = type(new_item) is cls
    old_fits = type(old_item) is cls
    if change is _MODIFY:
        if new_fits and old_fits:
            if cls is CleanupRecord:
                return CleanupUpdated
            same = new_item.status == old_item.status  # type: ignore[union-attr]
            return EntitlementUpdated if same else EntitlementStatusChanged
    elif change is _INSERT:
        if new_fits and old_item is None:
            return EntitlementCreated if cls is EntitlementRow else CleanupScheduled
    elif new_item is None and (old_item is None or old_fits):  # REMOVE
        if cls is EntitlementRow:
            return EntitlementRemoved
        return CleanupExpired if ttl_deletion else CleanupCancelled
    return UnknownItemChanged


# -- times and context ----------------------------------------------------------------------------------


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
        try:
            if value.tzinfo is None or value.utcoffset() is None:
                raise DecodeError("ApproximateCreationDateTime has no time zone")
            return value.astimezone(UTC)
        except (OverflowError, ValueError):
            raise DecodeError("ApproximateCreationDateTime is out of range") from None
    if type(value) is int:
        try:
            return _EPOCH + timedelta(seconds=value)
        except OverflowError:
            raise DecodeError("ApproximateCreationDateTime is out of range") from None
    if type(value) is float:
        return _offset(value)
    if type(value) is Decimal:
        if not value.is_finite():
            raise DecodeError("ApproximateCreationDateTime is not finite")
        try:
            return _offset(float(value))
        except (OverflowError, ValueError):
            raise DecodeError("ApproximateCreationDateTime is out of range") from None
    raise DecodeError("ApproximateCreationDateTime is missing or not a number")


def _offset(seconds: float) -> datetime:
    if not math.isfinite(seconds):
        raise DecodeError("ApproximateCreationDateTime is not finite")
    try:
        return _EPOCH + timedelta(seconds=seconds)
    except OverflowError:
        raise DecodeError("ApproximateCreationDateTime is out of range") from None


def _kinesis_context(record: dict[str, Any], shard_id: str, read_at: str | None) -> RecordContext:
    """Where a refused Kinesis record sits: the Kinesis sequence number it was read at (when well formed)
    and its event id, as `_context` reads one."""
    placed = _context(record, shard_id, None)
    sequence = read_at if is_kinesis_sequence(read_at) else None
    return RecordContext(shard_id=shard_id, sequence_number=sequence, event_id=placed.event_id)


def _context(record: Any, shard_id: str, read_at: str | None) -> RecordContext:
    """Where a refused record sits: only values that are positions, and only when well formed."""
    sequence = read_at if is_sequence_number(read_at) else None
    event_id = None
    if isinstance(record, Mapping):
        candidate = record.get("eventID")
        ddb = record.get("dynamodb")
        found = ddb.get("SequenceNumber") if isinstance(ddb, Mapping) else None
    else:
        candidate = getattr(record, "eventID", None)
        found = getattr(getattr(record, "dynamodb", None), "SequenceNumber", None)
    if (
        type(candidate) is str
        and 0 < len(candidate) <= _MAX_EVENT_ID_IN_CONTEXT
        and candidate.isascii()
        and candidate.replace("-", "").isalnum()
    ):
        event_id = candidate
    if sequence is None and is_sequence_number(found):
        sequence = found
    return RecordContext(shard_id=shard_id, sequence_number=sequence, event_id=event_id)

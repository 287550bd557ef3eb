"""The fast paths of stream record decoding against the validated path.

The fast paths: `pipeline._wire_events` (the adapter's bytes decoded by msgspec into the service's
shapes) and `pipeline._fast_events` (a parsed record, in either shape). The validated path is
`pipeline.decode` with both switched off (made to recognise nothing), so every record goes through
pydantic's strict validation. For any record, in either shape, the fast paths must give the very same
outcome: the same event class, equal models, equal dumps (Python and JSON, in the same field order), the
same fields set, extras and private state on the event, its position and its items; or the same
exception with the same reason.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, field_validator

import pipeline.decode as decode_module
from pipeline._fast_events import _ASSUMED, FAST_PATH_ENABLED, _model_matches, fast_event
from pipeline._wire_events import wire_event
from pipeline.decode import decode_record, decode_stream_record
from pipeline.errors import DecodeError
from pipeline.events import (
    CleanupCancelled,
    CleanupExpired,
    CleanupScheduled,
    CleanupUpdated,
    EntitlementCreated,
    EntitlementRemoved,
    EntitlementStatusChanged,
    EntitlementUpdated,
    StreamEvent,
    StreamPosition,
)
from schema.table import CleanupRecord, EntitlementRow

FIXTURES = Path(__file__).parent / "fixtures"
STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-11-30T10:00:00.000"
SHARD = "shardId-00000001732960800000-5f0e8c1a"
ADAPTER: dict[str, Any] = json.loads((FIXTURES / "entitlements_adapter_records.json").read_text())
RAW: dict[str, Any] = json.loads((FIXTURES / "entitlements_raw_records.json").read_text())
FAST_EVENT_CLASSES = {
    EntitlementCreated,
    EntitlementStatusChanged,
    EntitlementUpdated,
    EntitlementRemoved,
    CleanupScheduled,
    CleanupUpdated,
    CleanupCancelled,
    CleanupExpired,
}


# -- the two paths and how their outcomes are compared --------------------------------------------------


def _outcome(call: Callable[[], StreamEvent]) -> StreamEvent | Exception:
    try:
        return call()
    except Exception as error:  # compared below: the same type and reason on both paths
        return error


def _validated(call: Callable[[], StreamEvent]) -> StreamEvent | Exception:
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(decode_module, "_wire_event", lambda *args, **kwargs: None)
        patched.setattr(decode_module, "_fast_event", lambda *args, **kwargs: None)
        return _outcome(call)


def _without_the_wire_path(call: Callable[[], StreamEvent]) -> StreamEvent | Exception:
    """The dict-based fast path first, then the validated path: what an adapter record the wire path
    does not recognise goes through."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(decode_module, "_wire_event", lambda *args, **kwargs: None)
        return _outcome(call)


def _adapter_call(data: bytes, read_at: str | None) -> Callable[[], StreamEvent]:
    return lambda: decode_record(data, stream_arn=STREAM_ARN, shard_id=SHARD, sequence_number=read_at)


def _raw_call(record: dict[str, Any]) -> Callable[[], StreamEvent]:
    return lambda: decode_stream_record(record, stream_arn=STREAM_ARN, shard_id=SHARD)


def _state(model: Any) -> Any:
    """Everything an instance holds, recursively: class, fields in order, fields set, extras, private."""
    if isinstance(model, BaseModel):
        return (
            type(model),
            [(name, _state(value)) for name, value in model.__dict__.items()],
            model.__pydantic_fields_set__,
            type(model.__pydantic_fields_set__),
            model.__pydantic_extra__,
            model.__pydantic_private__,
        )
    return (type(model), model)


def _json(model: BaseModel) -> str | type[Exception]:
    try:
        return model.model_dump_json()
    except Exception as error:  # bytes that are not UTF-8 cannot be dumped to JSON, on either path
        return type(error)


def assert_same_outcome(fast: StreamEvent | Exception, validated: StreamEvent | Exception) -> None:
    if isinstance(validated, Exception):
        assert type(fast) is type(validated)
        assert str(fast) == str(validated)
        if isinstance(validated, DecodeError):
            assert isinstance(fast, DecodeError)
            assert (fast.reason, fast.context) == (validated.reason, validated.context)
        return
    assert isinstance(fast, StreamEvent)
    assert type(fast) is type(validated)
    assert fast == validated
    assert fast.model_dump() == validated.model_dump()
    assert _json(fast) == _json(validated)
    assert repr(fast) == repr(validated)
    assert _state(fast) == _state(validated)


# -- strategies -----------------------------------------------------------------------------------------

text = st.text(max_size=10)
statuses = st.sampled_from(["Active", "Superseded", "Cancelled", "Removed", "Paused", "", "ACTIVE", "Aktiv✓"])
valid_numbers_text = st.one_of(
    st.integers(-(10**38) + 1, 10**38 - 1).map(str),
    st.decimals(-(10**20), 10**20, allow_nan=False, allow_infinity=False, places=4).map(str),
    st.sampled_from(["1E+125", "1.000", "-0", "0.5e-3", "1e-130"]),
)
invalid_numbers_text = st.sampled_from(["1E+126", "NaN", "1_0", " 1", "١٢", "9" * 39, "", "1e-131"])
base64_text = st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode())
valid_scalar_avs = st.one_of(
    st.builds(lambda s: {"S": s}, text),
    st.builds(lambda n: {"N": n}, valid_numbers_text),
    st.builds(lambda b: {"B": b}, base64_text),
    st.builds(lambda b: {"BOOL": b}, st.booleans()),
    st.just({"NULL": True}),
    st.builds(lambda s: {"SS": sorted(s)}, st.sets(text, min_size=1, max_size=3)),
    st.builds(lambda s: {"NS": [str(n) for n in s]}, st.sets(st.integers(-999, 999), min_size=1, max_size=3)),
    st.builds(
        lambda s: {"BS": [base64.b64encode(b).decode() for b in s]},
        st.sets(st.binary(max_size=4), min_size=1, max_size=3),
    ),
)
malformed_avs = st.sampled_from(
    [
        {},
        {"S": 1},
        {"S": None},
        {"S": "a", "N": "1"},
        {"X": "1"},
        {"NULL": False},
        {"SS": []},
        {"SS": ["a", "a"]},
        {"NS": ["1", "1.0"]},
        {"B": "not base64!"},
        {"BOOL": "true"},
        "S",
        ["S", "a"],
        None,
        7,
    ]
) | st.builds(lambda n: {"N": n}, invalid_numbers_text)
valid_avs = st.recursive(
    valid_scalar_avs,
    lambda children: st.one_of(
        st.builds(lambda m: {"M": m}, st.dictionaries(text, children, max_size=3)),
        st.builds(lambda items: {"L": items}, st.lists(children, max_size=3)),
    ),
    max_leaves=6,
)
any_avs = st.recursive(
    valid_scalar_avs | malformed_avs,
    lambda children: st.one_of(
        st.builds(lambda m: {"M": m}, st.dictionaries(text, children, max_size=3)),
        st.builds(lambda items: {"L": items}, st.lists(children, max_size=3)),
    ),
    max_leaves=6,
)
FIELD_NAMES = {*EntitlementRow.model_fields, *CleanupRecord.model_fields}
extra_names = text | st.sampled_from(["kind", "_private", "__dict__", "model_config", "model_fields", ""])
ttl_avs = st.one_of(
    st.integers(0, 2**40).map(lambda n: {"N": str(n)}),  # seconds, or milliseconds (a planted fault)
    st.sampled_from([{"N": "1772697600.5"}, {"N": "-1"}, {"N": "1E+125"}, {"NULL": True}]),
    st.integers(0, 2**34).map(lambda n: {"S": str(n)}),
)
odd_ttl_avs = st.sampled_from([{"BOOL": True}, {"SS": ["1"]}, {"B": "AAE="}, {"M": {}}])


def usually(draw: st.DrawFn, percent: int = 85) -> bool:
    return draw(st.integers(0, 99)) < percent


def _s(value: str) -> dict[str, str]:
    return {"S": value}


@st.composite
def images(draw: st.DrawFn, sort_key_av: Any, well_formed: bool) -> dict[str, Any]:
    """An item image of the keys' kind; when not `well_formed`, now and again of any shape."""
    user = draw(st.sampled_from(["3f1c2b9e", "u-ü", ""]) | text)
    account = draw(text)
    sort_key = sort_key_av.get("S") if isinstance(sort_key_av, dict) else None
    attributes: dict[str, Any] = {"pk": _s(f"USER#{user}"), "sk": sort_key_av}
    attributes["userId"] = _s(user)
    attributes["arrayAccountId"] = _s(account)
    if isinstance(sort_key, str) and sort_key.startswith("ENTITLEMENT#"):
        attributes["status"] = _s(draw(statuses))
        for name in ("createdAt", "updatedAt", "processorToken", "gsi1pk", "gsi1sk"):
            if usually(draw, 70):
                attributes[name] = _s(draw(text)) if usually(draw, 90) else {"NULL": True}
    else:
        if usually(draw, 80):
            attributes["ttl"] = draw(ttl_avs)
        if usually(draw, 50):
            attributes["createdAt"] = _s(draw(text))
    for _ in range(draw(st.integers(0, 3)) if usually(draw, 30) else 0):
        name = draw(text.filter(lambda n: n not in FIELD_NAMES))
        attributes[name] = draw(valid_avs if well_formed or usually(draw) else any_avs)
    if not well_formed and not usually(draw, 60):
        for _ in range(draw(st.integers(1, 3))):
            name = draw(st.sampled_from([*attributes, "kind", "status", "ttl"]) | extra_names)
            if usually(draw, 20):
                attributes.pop(name, None)
                continue
            attributes[name] = draw(
                st.one_of(any_avs, ttl_avs | odd_ttl_avs, st.builds(_s, st.sampled_from(["", "x"])))
            )
    order = draw(st.permutations(list(attributes)))
    return {name: attributes[name] for name in order}


SORT_KEYS = ["ENTITLEMENT#acc-1", "CLEANUP#CANCELLATION", "CLEANUP#STALE#acc-1"]
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


@st.composite
def adapter_records(draw: st.DrawFn, well_formed: bool = False) -> tuple[dict[str, Any], str | None]:
    """A stream record in the adapter's shape and the KCL sequence number it was read at (or None).

    `well_formed`: one of the eight typed events, with any extras, statuses, ttls and text. Otherwise
    mostly well formed, with every part sometimes missing, of another type or of another kind.
    """
    if well_formed or usually(draw, 90):
        sort_key_av: Any = _s(draw(st.sampled_from(SORT_KEYS)))
    else:
        sort_key_av = draw(st.sampled_from([_s("X#1"), _s(""), {"N": "1"}, {"B": "AAE="}]) | malformed_avs)
    change = draw(st.sampled_from(["INSERT", "MODIFY", "REMOVE"]))
    if not well_formed and not usually(draw, 95):
        change = draw(st.sampled_from(["UPSERT", "", "insert"]))
    ddb: dict[str, Any] = {
        "ApproximateCreationDateTime": draw(st.integers(0, 2**32 * 1000 - 1)),
        "Keys": {"pk": _s("USER#u-1"), "sk": sort_key_av},
        "SequenceNumber": draw(st.from_regex(r"[0-9]{1,48}", fullmatch=True)),
        "SizeBytes": 1,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if not well_formed and not usually(draw):
        ddb["Keys"] = draw(st.sampled_from([{"sk": sort_key_av}, {"pk": {"S": "x"}}, {}, [], None]))
    implied = {"NewImage": change != "REMOVE", "OldImage": change != "INSERT"}
    for section, present in implied.items():
        if well_formed or usually(draw, 90) == present:
            image_sort_key = sort_key_av if well_formed or usually(draw, 95) else _s("CLEANUP#STALE#acc-2")
            ddb[section] = draw(images(image_sort_key, well_formed))
        elif not well_formed and usually(draw, 20):
            ddb[section] = draw(st.sampled_from([{}, [], None, "x"]))  # empty or no image
        if well_formed and not present:
            ddb.pop(section, None)
    record: dict[str, Any] = {
        "eventID": draw(st.from_regex(r"[0-9a-f]{32}", fullmatch=True)),
        "eventName": change,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "eu-west-1",
        "dynamodb": ddb,
    }
    identity = draw(
        st.sampled_from(
            [
                None,
                TTL_IDENTITY,
                {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"},
                {"type": "Service", "principalId": "replication.dynamodb.amazonaws.com"},
                {"type": "Service"},
            ]
        )
    )
    if identity is not None:
        record["userIdentity"] = identity
    if usually(draw, 30):
        record["eventSourceARN"] = STREAM_ARN
    read_at = None
    if usually(draw, 50):
        read_at = ddb["SequenceNumber"]
        if usually(draw, 30):
            del ddb["SequenceNumber"]
    if not well_formed and not usually(draw, 80):
        _break_envelope(draw, record)
        if read_at is not None and usually(draw, 20):
            read_at = draw(st.sampled_from(["1", "x", "0" * 49]))
    return record, read_at


def _break_envelope(draw: st.DrawFn, record: dict[str, Any]) -> None:
    ddb = record["dynamodb"]
    target = draw(st.sampled_from(["eventID", "dynamodb", "SequenceNumber", "created", "arn", "identity"]))
    if target == "eventID":
        record["eventID"] = draw(st.sampled_from(["", 12, None, ["e"]]))
    elif target == "dynamodb":
        record["dynamodb"] = draw(st.sampled_from([None, [], "ddb"]))
    elif target == "SequenceNumber":
        ddb["SequenceNumber"] = draw(st.sampled_from(["", "1" * 49, "12a", "١٢٣", 12, None, " 1"]))
    elif target == "created":
        ddb["ApproximateCreationDateTime"] = draw(
            st.sampled_from([-1, 2**32 * 1000, 10**18, 1772611200123.5, True, "1", None, 10**40, -(10**40)])
        )
    elif target == "arn":
        record["eventSourceARN"] = draw(st.sampled_from(["arn:other", 1, ""]))
    else:
        record["userIdentity"] = draw(
            st.sampled_from([{}, "Service", [], {"type": 1}, {"principalId": None, "type": None}, 0])
        )


def _to_raw(draw: st.DrawFn, record: dict[str, Any], read_at: str | None) -> dict[str, Any]:
    """The same record as GetRecords / Lambda give it: its own sequence number (there is no KCL one),
    epoch seconds (or a datetime from boto3), sometimes capitalised identity keys, binary values as
    bytes, and names JSON cannot carry."""
    raw = copy.deepcopy(record)
    ddb = raw.get("dynamodb")
    if not isinstance(ddb, dict):
        return raw
    if "SequenceNumber" not in ddb and usually(draw, 95):
        ddb["SequenceNumber"] = read_at
    millis = ddb.get("ApproximateCreationDateTime")
    if type(millis) is int and abs(millis) < 2**50:
        utc_plus_2 = timezone(timedelta(hours=2))
        choices: list[Any] = [
            millis // 1000,
            millis / 1000,
            Decimal(millis) / 1000,
            datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis),
            datetime(1970, 1, 1, tzinfo=utc_plus_2) + timedelta(milliseconds=millis),
        ]
        if not usually(draw, 95):
            choices = [datetime(2026, 3, 4, 8, 0), float("nan"), float("inf"), 10**12, -(10**12)]
        ddb["ApproximateCreationDateTime"] = draw(st.sampled_from(choices))
    identity = raw.get("userIdentity")
    if isinstance(identity, dict) and usually(draw, 50):
        raw["userIdentity"] = {key[0].upper() + key[1:]: value for key, value in identity.items()}
    for section in ("NewImage", "OldImage", "Keys"):
        image = ddb.get(section)
        if isinstance(image, dict) and image and not usually(draw, 80):
            name = draw(st.sampled_from(["\ud800x", "ok-\udfff", "plain"]))
            image[name] = draw(st.sampled_from([{"S": "v"}, {"B": b"\x00\xff"}, {"BS": [b"\x01", b"\x02"]}]))
    return raw


# -- the property: one outcome on both paths ------------------------------------------------------------


@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adapter_records())
def test_the_fast_paths_give_the_validated_outcome_for_any_adapter_record(
    drawn: tuple[dict[str, Any], str | None],
) -> None:
    record, read_at = drawn
    data = json.dumps(record, ensure_ascii=False).encode()

    fast = _outcome(_adapter_call(data, read_at))
    dict_path = _without_the_wire_path(_adapter_call(data, read_at))
    validated = _validated(_adapter_call(data, read_at))

    if wire_event(data, STREAM_ARN, SHARD, read_at):
        event("wire path")
    elif fast_event(json.loads(data), STREAM_ARN, SHARD, read_at, True):
        event("dict fast path")
    else:
        event("validated")
    event(type(validated).__name__)
    assert_same_outcome(fast, validated)
    assert_same_outcome(dict_path, validated)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adapter_records(), st.data())
def test_the_fast_path_gives_the_validated_outcome_for_any_raw_record(
    drawn: tuple[dict[str, Any], str | None], data: st.DataObject
) -> None:
    record = _to_raw(data.draw, *drawn)
    untouched = copy.deepcopy(record)

    fast = _outcome(_raw_call(record))
    validated = _validated(_raw_call(record))

    event("fast path" if fast_event(record, STREAM_ARN, SHARD, None, False) else "validated")
    event(type(validated).__name__)
    assert_same_outcome(fast, validated)
    assert record == untouched  # neither path changes the caller's record


# -- what the fast path covers --------------------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adapter_records(well_formed=True), st.data())
def test_every_well_formed_record_of_a_typed_event_takes_the_fast_path_in_both_shapes(
    drawn: tuple[dict[str, Any], str | None], data: st.DataObject
) -> None:
    record, read_at = drawn
    raw = copy.deepcopy(record)
    raw["dynamodb"]["ApproximateCreationDateTime"] = data.draw(
        st.sampled_from([record["dynamodb"]["ApproximateCreationDateTime"] // 1000, 1772611200.123])
    )
    if "SequenceNumber" not in raw["dynamodb"]:
        raw["dynamodb"]["SequenceNumber"] = read_at

    for built, outcome in (
        (
            fast_event(json.loads(json.dumps(record)), STREAM_ARN, SHARD, read_at, True),
            _validated(_adapter_call(json.dumps(record).encode(), read_at)),
        ),
        (fast_event(raw, STREAM_ARN, SHARD, None, False), _validated(_raw_call(raw))),
    ):
        assert built is not None
        assert type(built) in FAST_EVENT_CLASSES
        assert_same_outcome(built, outcome)
        event(type(built).__name__)


@pytest.mark.parametrize("name", [n for n in ADAPTER if not n.startswith("_") and n != "unknown_item"])
def test_each_documented_entitlements_record_takes_the_fast_path(name: str) -> None:
    record = copy.deepcopy(ADAPTER[name])

    built = fast_event(record, STREAM_ARN, SHARD, None, True)

    assert built is not None
    assert_same_outcome(built, _validated(_adapter_call(json.dumps(ADAPTER[name]).encode(), None)))


def _changed(name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    record = copy.deepcopy(ADAPTER[name])
    change(record)
    return record


@pytest.mark.parametrize("name", [n for n in ADAPTER if not n.startswith("_") and n != "unknown_item"])
def test_each_documented_entitlements_record_takes_the_wire_path(name: str) -> None:
    data = json.dumps(ADAPTER[name]).encode()

    built = wire_event(data, STREAM_ARN, SHARD, None)

    assert built is not None
    assert_same_outcome(built, _validated(_adapter_call(data, None)))


def _as_the_service_writes_it(record: dict[str, Any]) -> dict[str, Any]:
    """The record with what the service never writes taken out: attributes the table does not define,
    NULL values, and a ttl that is not a Number of whole seconds."""
    shaped = copy.deepcopy(record)
    for section in ("NewImage", "OldImage"):
        image = shaped["dynamodb"].get(section)
        if not image:
            continue
        for name in list(image):
            if name not in FIELD_NAMES or name == "kind" or "NULL" in image[name]:
                del image[name]
        if "ttl" in image and "N" not in image["ttl"]:
            image["ttl"] = {"N": "1772697600"}
    return shaped


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adapter_records(well_formed=True))
def test_every_record_as_the_service_writes_it_takes_the_wire_path(
    drawn: tuple[dict[str, Any], str | None],
) -> None:
    record, read_at = drawn
    data = json.dumps(_as_the_service_writes_it(record), ensure_ascii=False).encode()

    built = wire_event(data, STREAM_ARN, SHARD, read_at)

    assert built is not None
    assert_same_outcome(built, _validated(_adapter_call(data, read_at)))
    event(type(built).__name__)


WIRE_FALLBACKS: dict[str, dict[str, Any]] = {
    "an attribute the table does not define": _changed(
        "relink", lambda r: r["dynamodb"]["NewImage"].__setitem__("tier", {"S": "gold"})
    ),
    "a NULL optional attribute": _changed(
        "relink", lambda r: r["dynamodb"]["OldImage"].__setitem__("processorToken", {"NULL": True})
    ),
    "a ttl written as a string": _changed(
        "stale_scheduled", lambda r: r["dynamodb"]["NewImage"].__setitem__("ttl", {"S": "1772697600"})
    ),
    "a ttl on an entitlement row": _changed(
        "relink", lambda r: r["dynamodb"]["NewImage"].__setitem__("ttl", {"N": "1772697600"})
    ),
    "an entitlement attribute on a cleanup record": _changed(
        "cancellation_scheduled", lambda r: r["dynamodb"]["NewImage"].__setitem__("status", {"S": "Active"})
    ),
    "a key attribute that is a Number": _changed(
        "relink", lambda r: r["dynamodb"]["Keys"].__setitem__("version", {"N": "1"})
    ),
}


@pytest.mark.parametrize("name", WIRE_FALLBACKS)
def test_a_record_the_wire_path_leaves_takes_the_dict_fast_path(name: str) -> None:
    data = json.dumps(WIRE_FALLBACKS[name]).encode()

    assert wire_event(data, STREAM_ARN, SHARD, None) is None
    built = fast_event(json.loads(data), STREAM_ARN, SHARD, None, True)
    assert built is not None
    assert_same_outcome(_outcome(_adapter_call(data, None)), _validated(_adapter_call(data, None)))
    assert_same_outcome(built, _validated(_adapter_call(data, None)))


def _json_variants() -> dict[str, bytes]:
    """The same record written in ways JSON allows (and one it does not), for both parsers to read."""
    text = json.dumps(ADAPTER["relink"])
    user_id = ADAPTER["relink"]["dynamodb"]["NewImage"]["userId"]["S"]
    return {
        "spaces around every token": json.dumps(ADAPTER["relink"], indent=2).encode(),
        "escaped characters": json.dumps(ADAPTER["relink"], ensure_ascii=True)
        .replace(user_id, "".join(f"\\u{ord(c):04x}" for c in user_id))
        .encode(),
        "a duplicate key in the envelope (the last wins)": ('{"eventName": "INSERT", ' + text[1:]).encode(),
        "a duplicate attribute in an image (the last wins)": text.replace(
            '"NewImage": {', '"NewImage": {"status": {"S": "Superseded"}, '
        ).encode(),
        "a duplicate type key in a value": text.replace(
            '{"S": "Active"}', '{"S": "x", "S": "Active"}'
        ).encode(),
        "a byte-order mark": b"\xef\xbb\xbf" + text.encode(),
        "a raw control character in a string": text.replace(user_id, user_id + "\n").encode(),
        "a lone surrogate escaped": text.replace(user_id, user_id + "\\ud800").encode(),
        "trailing data": text.encode() + b" {}",
    }


@pytest.mark.parametrize(("name", "data"), _json_variants().items())
def test_both_parsers_read_json_alike(name: str, data: bytes) -> None:
    assert_same_outcome(_outcome(_adapter_call(data, None)), _validated(_adapter_call(data, None)))


@pytest.mark.parametrize("name", [n for n in RAW if not n.startswith("_")])
def test_each_documented_raw_record_takes_the_fast_path(name: str) -> None:
    built = fast_event(copy.deepcopy(RAW[name]), STREAM_ARN, SHARD, None, False)

    assert built is not None
    assert_same_outcome(built, _validated(_raw_call(RAW[name])))


FALLBACKS: dict[str, dict[str, Any]] = {
    "an unknown sort key": copy.deepcopy(ADAPTER["unknown_item"]),
    "a REMOVE without its old image": _changed(
        "reactivation_deletes_cancellation", lambda r: r["dynamodb"].pop("OldImage")
    ),
    "a MODIFY without its old image": _changed("relink", lambda r: r["dynamodb"].pop("OldImage")),
    "an image of another kind": _changed(
        "relink", lambda r: r["dynamodb"]["NewImage"].__setitem__("sk", {"S": "CLEANUP#CANCELLATION"})
    ),
    "a status that is not a string": _changed(
        "cancellation", lambda r: r["dynamodb"]["NewImage"].__setitem__("status", {"N": "2"})
    ),
    "a NULL required attribute": _changed(
        "relink", lambda r: r["dynamodb"]["NewImage"].__setitem__("userId", {"NULL": True})
    ),
    "a missing required attribute": _changed("relink", lambda r: r["dynamodb"]["OldImage"].pop("status")),
    "a boolean ttl": _changed(
        "stale_scheduled", lambda r: r["dynamodb"]["NewImage"].__setitem__("ttl", {"BOOL": True})
    ),
    "an attribute named kind": _changed(
        "relink", lambda r: r["dynamodb"]["NewImage"].__setitem__("kind", {"S": "premium"})
    ),
    "a creation time in fractional milliseconds": _changed(
        "relink", lambda r: r["dynamodb"].__setitem__("ApproximateCreationDateTime", 1772611200123.5)
    ),
    "a malformed attribute value": _changed(
        "relink", lambda r: r["dynamodb"]["NewImage"].__setitem__("status", {"S": "Active", "N": "1"})
    ),
    "another stream": _changed("relink", lambda r: r.__setitem__("eventSourceARN", "arn:other")),
    "an identity naming nothing": _changed("relink", lambda r: r.__setitem__("userIdentity", {})),
}


@pytest.mark.parametrize("name", FALLBACKS)
def test_a_record_the_fast_path_does_not_recognise_takes_the_validated_path(name: str) -> None:
    record = FALLBACKS[name]
    data = json.dumps(record).encode()

    assert wire_event(data, STREAM_ARN, SHARD, None) is None
    assert fast_event(json.loads(data), STREAM_ARN, SHARD, None, True) is None
    assert_same_outcome(_outcome(_adapter_call(data, None)), _validated(_adapter_call(data, None)))


def test_an_extra_name_pydantic_cannot_read_takes_the_validated_path() -> None:
    record = copy.deepcopy(RAW["cancellation"])
    record["dynamodb"]["NewImage"]["\ud800note"] = {"S": "v"}

    assert fast_event(record, STREAM_ARN, SHARD, None, False) is None
    assert_same_outcome(_outcome(_raw_call(record)), _validated(_raw_call(record)))


# -- what the fast path builds --------------------------------------------------------------------------


def _well_formed_events(drawn: tuple[dict[str, Any], str | None]) -> StreamEvent:
    record, read_at = drawn
    built = fast_event(record, STREAM_ARN, SHARD, read_at, True)
    assert built is not None
    return built


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adapter_records(well_formed=True))
def test_every_fast_built_event_revalidates_to_itself(drawn: tuple[dict[str, Any], str | None]) -> None:
    built = _well_formed_events(drawn)

    assert type(built).model_validate(built.model_dump(), strict=False) == built
    assert type(built).model_validate(built.model_dump(), strict=True) == built


def _constructed(model: BaseModel) -> BaseModel:
    """The same instance rebuilt by `model_construct` from its own state, items and position first."""
    values = {
        name: _constructed(value) if isinstance(value, BaseModel) else value
        for name, value in model.__dict__.items()
    }
    return type(model).model_construct(
        set(model.__pydantic_fields_set__), **values, **(model.__pydantic_extra__ or {})
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adapter_records(well_formed=True))
def test_fast_built_instances_hold_the_state_model_construct_gives(
    drawn: tuple[dict[str, Any], str | None],
) -> None:
    built = _well_formed_events(drawn)

    assert _state(built) == _state(_constructed(built))


def test_fast_built_events_are_frozen() -> None:
    built = fast_event(copy.deepcopy(ADAPTER["cancellation"]), STREAM_ARN, SHARD, None, True)

    assert isinstance(built, EntitlementStatusChanged)
    with pytest.raises(ValueError, match="frozen"):
        built.event_id = "x"
    with pytest.raises(ValueError, match="frozen"):
        built.new_item.status = "x"
    with pytest.raises(ValueError, match="frozen"):
        built.position.shard_id = "x"


# -- the fast path follows the models -------------------------------------------------------------------


def test_the_fast_path_is_on_for_the_current_models() -> None:
    assert FAST_PATH_ENABLED
    assert decode_module._fast_event is fast_event


class _RowWithAField(EntitlementRow):
    tier: str | None = None


class _RowWithAValidator(EntitlementRow):
    @field_validator("status")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


class _LaxRow(EntitlementRow):
    model_config = ConfigDict(strict=False)


class _RecordWithTypedExtras(CleanupRecord):
    __pydantic_extra__: dict[str, str] = Field(init=False)


class _PositionWithoutThePattern(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    stream_arn: str
    shard_id: str
    sequence_number: str


@pytest.mark.parametrize(
    ("changed", "like"),
    [
        (_RowWithAField, EntitlementRow),
        (_RowWithAValidator, EntitlementRow),
        (_LaxRow, EntitlementRow),
        (_RecordWithTypedExtras, CleanupRecord),
        (_PositionWithoutThePattern, StreamPosition),
    ],
)
def test_a_model_the_checks_were_not_written_for_turns_the_fast_path_off(
    changed: type[BaseModel], like: type[BaseModel]
) -> None:
    extra, assumed = _ASSUMED[like]

    assert _model_matches(like, extra, assumed)
    assert not _model_matches(changed, extra, assumed)

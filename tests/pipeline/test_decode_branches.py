"""The decoder's two branches (`pipeline.decode`): the typed branch (msgspec into the wire shape derived
from the item Structs) and the generic one (orjson and the strict attribute-value decoder) give the same
event, or the same refusal, for any record."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.decode as decode_module
from pipeline.decode import decode_record
from pipeline.errors import DecodeError
from pipeline.events import StreamEvent
from schema.table import ITEM_FIELDS, CleanupRecord, EntitlementRow, GuardItem, IdempotencyRecord

STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-11-30T10:00:00.000"
SHARD = "shardId-00000001732960800000-5f0e8c1a"
USER = "3f1c2b9e-8d7a-4c1e-9b2f-5a6d7e8f9012"
ADAPTER = json.loads((Path(__file__).parent / "fixtures" / "entitlements_adapter_records.json").read_text())


def _decode(data: bytes) -> StreamEvent | str:
    try:
        return decode_record(data, stream_arn=STREAM_ARN, shard_id=SHARD)
    except DecodeError as error:
        return error.reason


def _refused_by_the_typed_branch(data: bytes) -> Any:
    raise msgspec.DecodeError("the typed branch is off")


def both_branches(data: bytes) -> tuple[StreamEvent | str, StreamEvent | str]:
    with pytest.MonkeyPatch.context() as patched:
        typed = _decode(data)
        patched.setattr(decode_module, "_decode_typed", _refused_by_the_typed_branch)
        generic = _decode(data)
    return typed, generic


attribute_values = st.one_of(
    st.builds(lambda s: {"S": s}, st.sampled_from(["Active", "Cancelled", "x", ""])),
    st.builds(lambda n: {"N": str(n)}, st.integers(-5, 2_000_000_000)),
    st.just({"BOOL": True}),
    st.just({"NULL": True}),
    st.just({"SS": ["a"]}),
    st.sampled_from([{"N": "x1"}, {"N": "1E+126"}, {"S": 1}]),  # refused alike by both branches
)
item_attributes = [
    "pk", "sk", "userId", "arrayAccountId", "status", "ttl", "createdAt", "kind", "other",
    "version", "lastWrite", "requestDigest", "responseStatus", "responseBody",
]  # fmt: skip


def usually(draw: st.DrawFn, probability_percent: int = 85) -> bool:
    return draw(st.integers(0, 99)) < probability_percent


@st.composite
def images(draw: st.DrawFn, sort_key: str) -> dict[str, Any]:
    image = {"pk": {"S": f"USER#{USER}"}, "sk": {"S": sort_key}}
    if usually(draw):  # a well-formed item of its kind, most of the time
        if sort_key == "#GUARD":
            image.update(userId={"S": USER}, version={"N": "3"}, lastWrite={"S": "tok-1"})
        elif sort_key.startswith("IDEMPOTENCY#"):
            image.update(
                userId={"S": USER},
                requestDigest={"S": "d-1"},
                responseStatus={"N": "201"},
                responseBody={"S": "{}"},
                ttl={"N": "1772697600"},
            )
        else:
            image.update(
                userId={"S": USER},
                arrayAccountId={"S": "acc-1"},
                status={"S": draw(st.sampled_from(["Active", "Cancelled"]))},
                ttl={"N": "1772697600"},
            )
    if not usually(draw, 70):  # then, now and again, a few attributes of any type
        for name in draw(st.lists(st.sampled_from(item_attributes), min_size=1, max_size=3)):
            image[name] = draw(attribute_values)
    return image


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    """Stream records of every kind and change, mostly well formed, sometimes with images missing,
    extra, of the wrong type or of the wrong kind."""
    sort_key = draw(
        st.sampled_from(
            [
                "ENTITLEMENT#acc-1",
                "CLEANUP#CANCELLATION",
                "CLEANUP#STALE#acc-1",
                "#GUARD",
                "IDEMPOTENCY#d",
                "X",
            ]
        )
    )
    event_name = draw(st.sampled_from(["INSERT", "MODIFY", "REMOVE"]))
    ddb: dict[str, Any] = {
        "ApproximateCreationDateTime": 1772611200123,
        "Keys": {"pk": {"S": f"USER#{USER}"}, "sk": {"S": sort_key}},
        "SequenceNumber": "1",
    }
    expects = {"NewImage": event_name != "REMOVE", "OldImage": event_name != "INSERT"}
    for section, expected in expects.items():
        if usually(draw) == expected:
            image_sort_key = sort_key if usually(draw, 95) else "CLEANUP#STALE#acc-2"
            ddb[section] = draw(images(image_sort_key))
    record = {"eventID": "e-1", "eventName": event_name, "dynamodb": ddb}
    if draw(st.booleans()):
        record["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    return record


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_both_branches_give_the_same_event_or_the_same_refusal(record: dict[str, Any]) -> None:
    typed, generic = both_branches(json.dumps(record).encode())

    assert type(typed) is type(generic)
    assert typed == generic


@pytest.mark.parametrize("name", [n for n in ADAPTER if not n.startswith("_") and n != "unknown_item"])
def test_the_records_the_service_writes_take_the_typed_branch(name: str) -> None:
    record = copy.deepcopy(ADAPTER[name])
    record.pop("eventSourceARN", None)

    decode_module._decode_typed(json.dumps(record).encode())  # raises when it does not take it


def test_the_wire_image_declares_every_attribute_of_the_items_the_service_writes_and_no_other() -> None:
    written = (EntitlementRow, CleanupRecord, GuardItem, IdempotencyRecord)
    declared = {name for cls in written for name in ITEM_FIELDS[cls]}

    assert {field.name for field in msgspec.structs.fields(decode_module._WireImage)} == declared


@pytest.mark.parametrize(
    "image",
    [
        {"sk": {"S": "#GUARD"}, "version": {"N": "4"}, "updatedAt": {"S": "2026-03-04T10:00:00.000Z"},
         "lastWrite": {"S": "tok-4"}},
        {"sk": {"S": "IDEMPOTENCY#d-1"}, "requestDigest": {"S": "d-1"}, "responseStatus": {"N": "201"},
         "responseBody": {"S": "{}"}, "ttl": {"N": "1772697600"}, "createdAt": {"S": "2026-03-04T10:00:00Z"}},
    ],
    ids=["guard", "idempotency"],
)  # fmt: skip
def test_the_services_own_records_take_the_typed_branch_and_give_the_generic_event(
    image: dict[str, Any],
) -> None:
    full = {"pk": {"S": f"USER#{USER}"}, "userId": {"S": USER}, **image}
    keys = {"pk": full["pk"], "sk": full["sk"]}
    record = {
        "eventID": "e-1",
        "eventName": "INSERT",
        "dynamodb": {"ApproximateCreationDateTime": 1772611200123, "Keys": keys, "NewImage": full,
                     "SequenceNumber": "1"},
    }  # fmt: skip
    data = json.dumps(record).encode()

    decode_module._decode_typed(data)  # raises when it does not take it
    typed, generic = both_branches(data)
    assert typed == generic


@pytest.mark.parametrize("names", [(), ("ttl",), ("ttl", "version")], ids=["none", "one", "two"])
def test_the_exact_class_check_reads_the_other_attributes_as_a_tuple_whatever_their_number(
    names: tuple[str, ...],
) -> None:
    image = decode_module._WireImage(ttl=decode_module._N("1772697600"))

    read = decode_module._attributes_getter(names)(image)

    assert type(read) is tuple
    assert read == tuple(getattr(image, name) for name in names)

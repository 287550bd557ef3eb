"""DynamoDB JSON attribute values to Python and back (`pipeline._attribute_values`)."""

from __future__ import annotations

import base64
from decimal import Decimal, Rounded
from typing import Any

import orjson
import pytest
from boto3.dynamodb.types import TypeDeserializer
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline._attribute_values import (
    MAX_DEPTH,
    decode_image,
    decode_value,
    encode_image,
    encode_value,
    format_number,
    parse_number,
)
from pipeline.errors import DecodeError

# -- strategies -----------------------------------------------------------------------------------------


@st.composite
def dynamodb_numbers(draw: st.DrawFn) -> int | Decimal:
    """Any number DynamoDB stores, in the form the decoder returns it: int when integral, else a
    Decimal without trailing zeros. Up to 38 significant digits, magnitude 1E-130 .. 9.99..E+125."""
    significant = draw(st.integers(1, 38))
    coefficient = draw(st.integers(10 ** (significant - 1), 10**significant - 1).filter(lambda c: c % 10))
    exponent = draw(st.integers(-130 - (significant - 1), 125 - (significant - 1)))
    negative = draw(st.booleans())
    if exponent >= 0:
        value = coefficient * 10**exponent
        return -value if negative else value
    return Decimal((int(negative), tuple(int(d) for d in str(coefficient)), exponent))


numbers = st.one_of(st.integers(-(10**38) + 1, 10**38 - 1), dynamodb_numbers())
scalars = st.one_of(
    st.text(),
    numbers,
    st.binary(),
    st.booleans(),
    st.none(),
    st.frozensets(st.text(), min_size=1),
    st.frozensets(numbers, min_size=1),
    st.frozensets(st.binary(), min_size=1),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 == Decimal(1) == True would fool `==`)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, frozenset):
        return a == b and {type(x) for x in a} == {type(x) for x in b}
    return bool(a == b)


def through_stream_json(av: dict[str, Any]) -> dict[str, Any]:
    """What the value looks like after travelling as stream record JSON."""
    loaded: dict[str, Any] = orjson.loads(orjson.dumps(av))
    return loaded


# -- strings, numbers -----------------------------------------------------------------------------------


def test_a_string_decodes_to_str() -> None:
    assert decode_value({"S": "héllo"}) == "héllo"


def test_an_empty_string_is_a_valid_string() -> None:
    assert decode_value({"S": ""}) == ""


def test_an_integral_number_decodes_to_int() -> None:
    value = decode_value({"N": "-1767225600"})
    assert value == -1767225600
    assert type(value) is int


def test_a_fractional_number_decodes_to_an_exact_decimal() -> None:
    value = decode_value({"N": "0.1"})
    assert type(value) is Decimal
    assert value == Decimal("0.1")


def test_a_number_with_38_significant_digits_is_kept_exactly() -> None:
    assert (
        decode_value({"N": "12345678901234567890123456789012345678"})
        == 12345678901234567890123456789012345678
    )
    assert decode_value({"N": "1.2345678901234567890123456789012345678"}) == Decimal(
        "1.2345678901234567890123456789012345678"
    )


def test_trailing_zeros_are_not_significant_digits() -> None:
    assert decode_value({"N": "1." + "0" * 60}) == 1
    assert decode_value({"N": "12345678901234567890123456789012345678" + "0" * 20}) == (
        12345678901234567890123456789012345678 * 10**20
    )


def test_numbers_boto3_refuses_with_rounded_are_decoded_exactly() -> None:
    text = "1." + "0" * 40
    with pytest.raises(Rounded):
        TypeDeserializer().deserialize({"N": text})
    assert decode_value({"N": text}) == 1


def test_a_fraction_keeps_no_trailing_zeros() -> None:
    value = decode_value({"N": "2.500"})
    assert value == Decimal("2.5")
    assert str(value) == "2.5"


@pytest.mark.parametrize("text", ["0", "-0", "0.000", "0E+10", "000"])
def test_zero_in_any_spelling_is_int_zero(text: str) -> None:
    value = decode_value({"N": text})
    assert value == 0
    assert type(value) is int


def test_a_number_with_39_significant_digits_is_refused() -> None:
    with pytest.raises(DecodeError, match="more than 38 significant digits"):
        decode_value({"N": "123456789012345678901234567890123456789"})
    with pytest.raises(DecodeError, match="more than 38 significant digits"):
        decode_value({"N": "1.23456789012345678901234567890123456789"})


@pytest.mark.parametrize(
    "text",
    ["1E+126", "10" + "0" * 125, "-1E+126", "1E-131", "-9.9E-131", "1e99999999999999999999999"],
)
def test_numbers_beyond_dynamodbs_range_are_refused(text: str) -> None:
    with pytest.raises(DecodeError, match="outside DynamoDB's number range"):
        decode_value({"N": text})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "9.9999999999999999999999999999999999999E+125",
            Decimal("9.9999999999999999999999999999999999999E+125"),
        ),
        (
            "-9.9999999999999999999999999999999999999E+125",
            Decimal("-9.9999999999999999999999999999999999999E+125"),
        ),
        ("1E-130", Decimal("1E-130")),
        ("-1E-130", Decimal("-1E-130")),
        ("1E+125", 10**125),
    ],
)
def test_numbers_at_the_edges_of_dynamodbs_range_are_kept(text: str, expected: int | Decimal) -> None:
    assert decode_value({"N": text}) == expected


@pytest.mark.parametrize(
    "text",
    ["NaN", "Infinity", "-inf", " 1", "1 ", "1_000", "\u0661\u0662", "0x10", "", "-", "1e", ".", "1..2", "+"],
)
def test_number_text_that_is_not_a_plain_decimal_is_refused(text: str) -> None:
    with pytest.raises(DecodeError, match="N is not a decimal number"):
        decode_value({"N": text})


@given(dynamodb_numbers())
def test_numbers_in_scientific_notation_decode_to_the_same_value(number: int | Decimal) -> None:
    scientific = f"{Decimal(number):E}"
    assert same(parse_number(scientific), number)


# -- binary, sets, the rest -----------------------------------------------------------------------------


def test_binary_decodes_from_base64_text() -> None:
    assert decode_value({"B": "AAEqQQ=="}) == b"\x00\x01*A"


def test_binary_from_boto3_is_taken_as_bytes() -> None:
    assert decode_value({"B": b"\x00\x01"}) == b"\x00\x01"
    assert decode_value({"BS": [b"\x00", bytearray(b"\x01")]}) == frozenset({b"\x00", b"\x01"})


@pytest.mark.parametrize("text", ["AAEqQQ", "AA EqQQ==", "AAEqQQ==\n", "AAEq*Q==", "é", "AA==AA=="])
def test_binary_that_is_not_strict_base64_is_refused(text: str) -> None:
    with pytest.raises(DecodeError, match="B is not valid base64"):
        decode_value({"B": text})


def test_sets_decode_to_frozensets() -> None:
    assert decode_value({"SS": ["b", "a"]}) == frozenset({"a", "b"})
    assert decode_value({"NS": ["1", "2.5"]}) == frozenset({1, Decimal("2.5")})
    assert decode_value({"BS": ["AAEqQQ==", "QSoBAA=="]}) == frozenset({b"\x00\x01*A", b"A*\x01\x00"})


@pytest.mark.parametrize("tag", ["SS", "NS", "BS"])
def test_empty_sets_are_refused(tag: str) -> None:
    with pytest.raises(DecodeError, match="empty"):
        decode_value({tag: []})


@pytest.mark.parametrize(
    "av", [{"SS": ["a", "a"]}, {"NS": ["1", "1.0"]}, {"BS": ["AA==", "AA=="]}], ids=["SS", "NS", "BS"]
)
def test_sets_with_duplicate_members_are_refused(av: dict[str, Any]) -> None:
    with pytest.raises(DecodeError, match="duplicate"):
        decode_value(av)


def test_bool_and_null_decode() -> None:
    assert decode_value({"BOOL": False}) is False
    assert decode_value({"NULL": True}) is None


def test_null_must_be_true() -> None:
    with pytest.raises(DecodeError, match="NULL is not true"):
        decode_value({"NULL": False})


def test_maps_and_lists_nest() -> None:
    av = {"M": {"a": {"L": [{"N": "1"}, {"M": {"b": {"SS": ["x"]}}}, {"NULL": True}]}}}
    assert decode_value(av) == {"a": [1, {"b": frozenset({"x"})}, None]}


def test_empty_maps_and_lists_are_valid() -> None:
    assert decode_value({"M": {}}) == {}
    assert decode_value({"L": []}) == []


def _nested(depth: int) -> dict[str, Any]:
    av: dict[str, Any] = {"S": "leaf"}
    for _ in range(depth):
        av = {"L": [av]}
    return av


def test_documents_nested_as_deep_as_dynamodb_allows_decode() -> None:
    value = decode_value(_nested(MAX_DEPTH))
    for _ in range(MAX_DEPTH):
        value = value[0]
    assert value == "leaf"


def test_documents_nested_deeper_than_dynamodb_allows_are_refused() -> None:
    with pytest.raises(DecodeError, match="nest deeper"):
        decode_value(_nested(MAX_DEPTH + 1))


# -- strictness -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("av", [{}, {"S": "a", "N": "1"}], ids=["no type key", "two type keys"])
def test_an_attribute_value_has_exactly_one_type_key(av: dict[str, Any]) -> None:
    with pytest.raises(DecodeError, match="exactly one type key"):
        decode_value(av)
    with pytest.raises(DecodeError, match="exactly one type key"):
        decode_image({"attr": av})


@pytest.mark.parametrize("av", ["a", 1, None, ["S", "a"]])
def test_an_attribute_value_is_an_object(av: Any) -> None:
    with pytest.raises(DecodeError, match="not an object"):
        decode_value(av)
    with pytest.raises(DecodeError, match="not an object"):
        decode_image({"attr": av})


def test_an_unknown_type_key_is_refused() -> None:
    with pytest.raises(DecodeError, match="unknown type key"):
        decode_value({"X": "1"})


@pytest.mark.parametrize(
    "av",
    [
        {"S": 1},
        {"N": 1},
        {"BOOL": "true"},
        {"L": {}},
        {"M": []},
        {"SS": "a"},
        {"SS": [1]},
        {"NS": [1]},
        {"B": 1},
        {"M": {"a": "b"}},
    ],
    ids=str,
)
def test_a_payload_of_the_wrong_type_is_refused(av: dict[str, Any]) -> None:
    with pytest.raises(DecodeError):
        decode_value(av)


def test_an_image_is_an_object() -> None:
    with pytest.raises(DecodeError, match="image is not an object"):
        decode_image([{"S": "a"}])


def test_attribute_names_must_be_strings() -> None:
    with pytest.raises(DecodeError, match=r"attribute name .*not a string"):
        decode_image({1: {"S": "a"}})  # a boto3 or Lambda mapping, not JSON
    with pytest.raises(DecodeError, match=r"attribute name .*not a string"):
        decode_value({"M": {1: {"S": "a"}}})


@pytest.mark.parametrize(
    "av",
    [
        {"S": "SECRET-9f8e7d", "N": "1"},
        {"N": "SECRET-9f8e7d"},
        {"N": "9" * 39},
        {"B": "SECRET-9f8e7d"},
        {"SS": ["SECRET-9f8e7d", "SECRET-9f8e7d"]},
        {"SECRET-9f8e7d": "x"},
        {"M": {"SECRET-9f8e7d": {"BOOL": "SECRET-9f8e7d"}}},
    ],
    ids=str,
)
def test_error_messages_never_hold_the_value(av: dict[str, Any]) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_image({"SECRET-name": av})
    message = str(caught.value)
    assert "SECRET" not in message
    assert "9" * 10 not in message


# -- round trips ----------------------------------------------------------------------------------------


@settings(max_examples=300)
@given(values)
def test_any_dynamodb_value_round_trips_through_stream_json(value: Any) -> None:
    assert same(decode_value(through_stream_json(encode_value(value))), value)


@given(values)
def test_any_dynamodb_value_round_trips_as_boto3_gives_it(value: Any) -> None:
    # boto3's responses carry B and BS as bytes, not base64 text.
    def boto3_shape(av: dict[str, Any]) -> dict[str, Any]:
        ((tag, payload),) = av.items()
        if tag == "B":
            return {"B": base64.b64decode(payload)}
        if tag == "BS":
            return {"BS": [base64.b64decode(member) for member in payload]}
        if tag == "M":
            return {"M": {name: boto3_shape(member) for name, member in payload.items()}}
        if tag == "L":
            return {"L": [boto3_shape(member) for member in payload]}
        return av

    assert same(decode_value(boto3_shape(encode_value(value))), value)


@given(st.dictionaries(st.text(max_size=12), values, max_size=8))
def test_any_item_round_trips_as_an_image(item: dict[str, Any]) -> None:
    image = through_stream_json(encode_image(item))
    assert same(decode_image(image, names_are_text=True), item)
    assert same(decode_image(image), item)


@given(
    st.integers(10**37, 10**38 - 1).filter(lambda c: c % 10),
    st.integers(-130 - 37, 125 - 37),
    st.booleans(),
)
def test_numbers_of_exactly_38_significant_digits_round_trip(
    coefficient: int, exponent: int, negative: bool
) -> None:
    number = Decimal((int(negative), tuple(int(d) for d in str(coefficient)), exponent))
    value: int | Decimal = int(number) if exponent >= 0 else number
    av = through_stream_json(encode_value(value))
    assert same(decode_value(av), value)
    assert same(decode_value({"N": f"{number:E}"}), value)


@given(dynamodb_numbers())
def test_numbers_are_written_in_dynamodbs_canonical_text(number: int | Decimal) -> None:
    text = format_number(number)
    assert "E" not in text
    assert "e" not in text
    assert not ("." in text and text.endswith("0"))
    assert same(parse_number(text), number)


def test_encoding_refuses_floats() -> None:
    with pytest.raises(TypeError):
        encode_value(0.1)


@pytest.mark.parametrize(
    "value", [frozenset(), Decimal("NaN"), Decimal("Infinity"), 10**38 + 1, Decimal("1E+126"), {1, "a"}]
)
def test_encoding_refuses_what_dynamodb_cannot_store(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        encode_value(value)

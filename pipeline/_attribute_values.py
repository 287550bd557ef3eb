"""DynamoDB JSON attribute values to Python values, and back.

Decoding is strict: an attribute value is an object with exactly one type key, and each type's payload
must have the shape DynamoDB gives it. What comes out:

=========  ============================================================================================
``S``      ``str``
``N``      ``int`` when the number is integral, else ``Decimal`` (exact, trailing zeros stripped).
           At most 38 significant digits and a magnitude within 1E-130 .. 9.99..E+125, as DynamoDB
           stores numbers; anything else is refused. Trailing zeros are not significant, so
           ``"1.000…0"`` with 60 zeros is the int 1 (boto3's TypeDeserializer raises ``Rounded`` there).
``B``      ``bytes``: from base64 text (stream JSON, Lambda events) or bytes as given (boto3 responses).
``SS``     ``frozenset[str]``
``NS``     ``frozenset[int | Decimal]``
``BS``     ``frozenset[bytes]``
``BOOL``   ``bool``
``NULL``   ``None`` (the payload must be ``true``)
``M``      ``dict[str, Any]``
``L``      ``list[Any]``
=========  ============================================================================================

Sets are ``frozenset`` because a DynamoDB set is unordered, has no duplicates and is compared by
membership; a frozen set says all of that, is hashable, and matches the frozen event models. A sorted
tuple would invent an order the data does not have. Empty sets and duplicate members are refused:
DynamoDB never stores either.

Documents nest at most `MAX_DEPTH` levels, as in DynamoDB, which also bounds recursion on hostile input.

Errors are `DecodeError` with a reason that names the rule broken, never the attribute name or value.
`encode_value` / `encode_image` do the reverse (for the simulator and the tests) in the canonical text
DynamoDB returns: plain-notation numbers without trailing zeros, standard padded base64.
"""

from __future__ import annotations

__all__ = [
    "MAX_DEPTH",
    "MAX_SIGNIFICANT_DIGITS",
    "decode_image",
    "decode_value",
    "encode_image",
    "encode_value",
    "format_number",
    "parse_number",
]

import base64
import binascii
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from pipeline.errors import DecodeError

MAX_SIGNIFICANT_DIGITS = 38
MAX_DEPTH = 32  # DynamoDB: nested attributes up to 32 levels deep
# DynamoDB's number range: positive 1E-130 .. 9.99..E+125, the same negated, and zero. Expressed as the
# adjusted exponent (the power of ten of the most significant digit).
_MIN_ADJUSTED = -130
_MAX_ADJUSTED = 125
# A decimal number in plain or scientific notation, ASCII digits only (no NaN, Infinity, spaces or
# underscores, all of which `Decimal()` would otherwise take).
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


# -- decoding -------------------------------------------------------------------------------------------


def parse_number(text: Any) -> int | Decimal:
    """An ``N`` payload as an int (integral) or an exact Decimal, within DynamoDB's rules."""
    if type(text) is not str:
        raise DecodeError("N is not a string")
    # Fast path: a plain integer of at most 38 characters has at most 38 significant digits. An unsigned
    # one (a ttl, a version, a status code: what the service writes) is checked without a slice.
    if len(text) <= MAX_SIGNIFICANT_DIGITS and text.isdigit() and text.isascii():
        return int(text)
    digits = text[1:] if text[:1] == "-" else text
    if len(digits) <= MAX_SIGNIFICANT_DIGITS and digits.isdigit() and digits.isascii():
        return int(text)
    return _parse_number_exactly(text)


def _parse_number_exactly(text: str) -> int | Decimal:
    if _NUMBER.fullmatch(text) is None:
        raise DecodeError("N is not a decimal number")
    try:
        number = Decimal(text)  # exact: construction from a string never rounds
    except (InvalidOperation, ValueError):  # an exponent beyond what Decimal can hold
        raise DecodeError("N is outside DynamoDB's number range") from None
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite: the pattern admits no NaN or Infinity
    if not any(digits):
        return 0
    trailing = 0
    while digits[-1 - trailing] == 0:
        trailing += 1
    significant = len(digits) - trailing  # as_tuple() has no leading zeros for a non-zero number
    if significant > MAX_SIGNIFICANT_DIGITS:
        raise DecodeError("N has more than 38 significant digits")
    exponent += trailing
    adjusted = exponent + significant - 1
    if adjusted > _MAX_ADJUSTED or adjusted < _MIN_ADJUSTED:
        raise DecodeError("N is outside DynamoDB's number range")
    if exponent >= 0:
        return int(number)
    return Decimal((sign, digits[:significant], exponent))


def _binary(value: Any) -> bytes:
    if type(value) is str:
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise DecodeError("B is not valid base64") from None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise DecodeError("B is neither base64 text nor bytes")


def _members(tag: str, value: Any) -> list[Any] | tuple[Any, ...]:
    if type(value) is not list and type(value) is not tuple:
        raise DecodeError(f"{tag} is not a list")
    if not value:
        raise DecodeError(f"{tag} is empty (DynamoDB sets never are)")
    return value


def _unique(tag: str, members: frozenset[Any], given: int) -> frozenset[Any]:
    if len(members) != given:
        raise DecodeError(f"{tag} holds duplicate members")
    return members


def _map(value: Any, depth: int) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise DecodeError("M is not an object")
    out: dict[str, Any] = {}
    for name, member in value.items():
        if type(name) is not str:
            raise DecodeError("M holds an attribute name that is not a string")
        out[name] = decode_value(member, depth)
    return out


def _decode_tagged(tag: Any, value: Any, depth: int) -> Any:
    """Decode one payload. `depth` is the nesting level of the value being decoded (top level is 1)."""
    if tag == "S":
        if type(value) is str:
            return value
        raise DecodeError("S is not a string")
    if tag == "N":
        return parse_number(value)
    if tag == "BOOL":
        if type(value) is bool:
            return value
        raise DecodeError("BOOL is not a boolean")
    if tag == "NULL":
        if value is True:
            return None
        raise DecodeError("NULL is not true")
    if tag in ("M", "L"):
        if depth > MAX_DEPTH:
            raise DecodeError("attribute values nest deeper than DynamoDB allows")
        if tag == "M":
            return _map(value, depth + 1)
        if type(value) is not list and type(value) is not tuple:
            raise DecodeError("L is not a list")
        return [decode_value(member, depth + 1) for member in value]
    if tag == "B":
        return _binary(value)
    if tag == "SS":
        members = _members(tag, value)
        for member in members:
            if type(member) is not str:
                raise DecodeError("SS holds a member that is not a string")
        return _unique(tag, frozenset(members), len(members))
    if tag == "NS":
        members = _members(tag, value)
        return _unique(tag, frozenset([parse_number(member) for member in members]), len(members))
    if tag == "BS":
        members = _members(tag, value)
        return _unique(tag, frozenset([_binary(member) for member in members]), len(members))
    raise DecodeError("attribute value has an unknown type key")


def _unpack(av: Any) -> tuple[Any, Any]:
    try:
        ((tag, value),) = av.items()
    except (AttributeError, TypeError, ValueError):
        if isinstance(av, Mapping):
            raise DecodeError("attribute value does not have exactly one type key") from None
        raise DecodeError("attribute value is not an object") from None
    return tag, value


def decode_value(av: Any, depth: int = 1) -> Any:
    """One attribute value (``{"S": "x"}``) to its Python value."""
    tag, value = _unpack(av)
    return _decode_tagged(tag, value, depth)


def decode_image(image: Any, *, names_are_text: bool = False) -> dict[str, Any]:
    """A whole item image (or a Keys map): attribute name to attribute value, decoded.

    `names_are_text` skips the check that every attribute name is a string, for images parsed from
    JSON (where they cannot be anything else).
    """
    if type(image) is not dict:
        if not isinstance(image, Mapping):
            raise DecodeError("image is not an object")
        names_are_text = False
    if not names_are_text:
        for name in image:
            if type(name) is not str:
                raise DecodeError("attribute name is not a string")
    # The loop inlines the commonest case, a string; anything else goes through `_decode_tagged`. An
    # attribute value without `.get` or a length (a list, a string, a number) lands in the except
    # clause, and the careful loop there names what is wrong.
    out: dict[str, Any] = {}
    try:
        for name, av in image.items():
            text = av.get("S")
            if type(text) is str and len(av) == 1:
                out[name] = text
            else:
                tag, value = _unpack(av)
                out[name] = _decode_tagged(tag, value, 1)
    except (AttributeError, TypeError):
        return {name: decode_value(av) for name, av in image.items()}
    return out


# -- encoding -------------------------------------------------------------------------------------------


def format_number(number: int | Decimal) -> str:
    """DynamoDB's canonical text for a number: plain notation, no trailing fractional zeros.

    Raises ValueError for a number DynamoDB cannot store (more than 38 significant digits, out of range,
    NaN or infinite).
    """
    if isinstance(number, bool) or not isinstance(number, int | Decimal):
        raise TypeError("a DynamoDB number is an int or a Decimal")
    if isinstance(number, int):
        text = str(number)
    else:
        if not number.is_finite():
            raise ValueError("DynamoDB numbers are finite")
        text = format(number, "f")  # exact: formatting without a precision never rounds
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        if text == "-0":
            text = "0"
    try:
        parse_number(text)
    except DecodeError as error:
        raise ValueError(error.reason) from None
    return text


def _encode_set(value: frozenset[Any] | set[Any]) -> dict[str, Any]:
    if not value:
        raise ValueError("DynamoDB sets cannot be empty")
    if all(isinstance(member, str) for member in value):
        return {"SS": sorted(value)}
    if all(isinstance(member, bytes | bytearray) for member in value):
        return {"BS": [base64.b64encode(member).decode("ascii") for member in sorted(value)]}
    if all(isinstance(member, int | Decimal) and not isinstance(member, bool) for member in value):
        return {"NS": sorted(format_number(member) for member in value)}
    raise TypeError("a DynamoDB set holds only strings, only numbers or only bytes")


def encode_value(value: Any) -> dict[str, Any]:
    """A Python value to a DynamoDB JSON attribute value, as the stream JSON carries it.

    The inverse of `decode_value` for every value it returns. Floats are refused (as boto3 refuses
    them): they cannot say which decimal number they mean.
    """
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, int | Decimal):
        return {"N": format_number(value)}
    if isinstance(value, bytes | bytearray):
        return {"B": base64.b64encode(value).decode("ascii")}
    if isinstance(value, set | frozenset):
        return _encode_set(value)
    if isinstance(value, Mapping):
        return {"M": encode_image(value)}
    if isinstance(value, list | tuple):
        return {"L": [encode_value(member) for member in value]}
    raise TypeError(f"no DynamoDB type for {type(value).__name__}")


def encode_image(item: Mapping[str, Any]) -> dict[str, Any]:
    """A whole item (attribute name to Python value) to a DynamoDB JSON image."""
    out: dict[str, Any] = {}
    for name, value in item.items():
        if not isinstance(name, str):
            raise TypeError("DynamoDB attribute names are strings")
        out[name] = encode_value(value)
    return out

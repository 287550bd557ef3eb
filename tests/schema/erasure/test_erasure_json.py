"""schema/erasure/_json.py: reading a body as JSON text, refusing what JSON.parse refuses."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from typing import NoReturn

import pytest

from schema.erasure._json import NESTED, NOT_JSON, is_json_text, load_json_text, nesting_depth


def _refuse(_name: str) -> NoReturn:
    raise ValueError(_name)


_STRICT_DECODER = json.JSONDecoder(parse_constant=_refuse)


def test_str_and_utf8_bytes_read_the_same() -> None:
    text = '{"key":"\u212aelvin@example.com"}'
    assert load_json_text(text) == load_json_text(text.encode("utf-8")) == {"key": "\u212aelvin@example.com"}


def test_bytearray_and_memoryview_are_bytes_too() -> None:
    assert load_json_text(bytearray(b"[1]")) == [1]
    assert load_json_text(memoryview(b"[1]")) == [1]


@pytest.mark.parametrize("body", [None, 1, 1.5, ["{}"], {"type": "erasure/ERASE"}])
def test_anything_but_str_or_bytes_is_not_json(body: object) -> None:
    assert load_json_text(body) is NOT_JSON


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "[NaN]", '{"a":-Infinity}'])
def test_nan_and_infinity_are_not_json(constant: str) -> None:
    assert load_json_text(constant) is NOT_JSON


def test_a_number_too_large_for_a_double_is_still_json() -> None:
    # JSON.parse reads 1e400 as Infinity: the body is JSON (and then not a valid message).
    assert load_json_text("[1e400]") == [float("inf")]


def test_an_integer_longer_than_python_converts_reads_as_a_double() -> None:
    assert load_json_text("[" + "9" * 5000 + "]") == [float("inf")]


def test_integers_of_ordinary_length_stay_exact() -> None:
    assert load_json_text("[2147483647, 12345678901234567890]") == [2147483647, 12345678901234567890]


def test_utf16_and_utf32_bytes_are_not_auto_detected() -> None:
    assert load_json_text('{"a":1}'.encode("utf-16")) is NOT_JSON
    assert load_json_text('{"a":1}'.encode("utf-32")) is NOT_JSON


def test_a_utf8_byte_order_mark_is_not_json() -> None:
    assert load_json_text(b"\xef\xbb\xbf{}") is NOT_JSON
    assert load_json_text("\ufeff{}") is NOT_JSON


def test_a_raw_lone_surrogate_inside_a_string_is_read_as_json_parse_reads_it() -> None:
    # The models refuse the string later, as the schema does in the Node reference: INVALID_MESSAGE.
    assert load_json_text('{"a":"\ud800"}') == {"a": "\ud800"}


def test_a_raw_lone_surrogate_outside_a_string_is_not_json() -> None:
    assert load_json_text('{"a":1\udc00}') is NOT_JSON


def test_bytes_holding_an_encoded_surrogate_are_not_json() -> None:
    assert load_json_text(b'{"a":"\xed\xa0\x80"}') is NOT_JSON


def test_a_lone_surrogate_escape_is_read_as_json_parse_reads_it() -> None:
    # The schema and the models refuse the string later: the body is JSON, then an invalid message.
    assert load_json_text('{"\\udc00":"\\ud800"}') == {"\udc00": "\ud800"}


def test_a_surrogate_pair_escape_is_one_character() -> None:
    assert load_json_text('["\\ud83d\\ude00"]') == ["\U0001f600"]


def test_json_text_whose_containers_nest_is_nested_at_any_depth() -> None:
    for depth in (2, 64, 991, 100_000):
        assert load_json_text("[" * depth + "]" * depth) is NESTED


def test_nesting_with_a_syntax_error_inside_is_not_json() -> None:
    assert load_json_text("[" * 100_000 + "x" + "]" * 100_000) is NOT_JSON
    assert load_json_text("[" * 100_000) is NOT_JSON


def test_one_level_of_containers_is_decoded() -> None:
    assert load_json_text('{"a":[1]}') is NESTED
    assert load_json_text('{"a":1}') == {"a": 1}
    assert load_json_text("[1]") == [1]


def _at_stack_depth(depth: int, call: Callable[[], object]) -> object:
    return call() if depth <= 0 else _at_stack_depth(depth - 1, call)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[" * 300 + "]" * 300, NESTED),
        ("[" * 5_000 + "]" * 5_000, NESTED),
        ("[" * 5_000 + "1,]" + "]" * 4_999, NOT_JSON),
        ('{"a":[[]]}', NESTED),
    ],
)
def test_the_reading_of_nested_text_does_not_depend_on_the_callers_stack(body: str, expected: object) -> None:
    near_the_limit = sys.getrecursionlimit() - len(inspect.stack()) - 30
    assert _at_stack_depth(near_the_limit, lambda: load_json_text(body)) is expected
    assert load_json_text(body) is expected


def test_brackets_inside_strings_are_not_nesting() -> None:
    assert nesting_depth('{"a":"[[[{{{","b":"\\"]]]"}') == 1
    assert load_json_text('{"a":"[[[{{{"}') == {"a": "[[[{{{"}


def test_an_unterminated_string_hides_the_brackets_after_it() -> None:
    assert nesting_depth('["[[[[') == 1


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "{}",
        '{"a":1}',
        '{"a":[1,{"b":null}]}',
        " [ 1 , 2 ] ",
        '"x"',
        "1",
        "-0.5e+3",
        "true",
        '["\\u00e9\\n\\/"]',
        "[[]] x",
        "[[],]",
        "[1 2]",
        '{"a" 1}',
        '{"a":}',
        "{,}",
        "[,1]",
        "1 2",
        '["\\x"]',
        "[01]",
        "[-]",
        "[1.]",
        "[1e]",
        "[tru]",
        '{"a":1}}',
        "[[1]]]",
        "[[1]",
        "[NaN]",
        "[Infinity]",
        "",
        " ",
        "[\x0c]",
        '["\t"]',
        "[1]\x00",
        '{"a":1 "b":2}',
        "[}",
        "{]",
        '{"a":1]',
        "[1}",
        '{"a":1,}',
        "{1:2}",
        "[\u00a01]",
        '["\\ud800"]',
    ],
)
def test_the_iterative_syntax_check_agrees_with_the_decoder(text: str) -> None:
    try:
        _STRICT_DECODER.decode(text)
        decoded = True
    except ValueError:
        decoded = False
    assert is_json_text(text) is decoded


def test_duplicate_keys_keep_the_last_value() -> None:
    assert load_json_text('{"a":1,"a":2}') == {"a": 2}

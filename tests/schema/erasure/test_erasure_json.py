"""schema/erasure/_json.py: reading a body as JSON text, refusing what JSON.parse refuses."""

from __future__ import annotations

import pytest

from schema.erasure._json import NOT_JSON, load_json_text


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


def test_a_python_str_holding_a_lone_surrogate_is_not_json() -> None:
    assert load_json_text('{"a":"\ud800"}') is NOT_JSON


def test_a_lone_surrogate_in_a_key_is_not_json() -> None:
    assert load_json_text('{"\\udc00":1}') is NOT_JSON


def test_a_surrogate_pair_escape_is_one_character() -> None:
    assert load_json_text('["\\ud83d\\ude00"]') == ["\U0001f600"]


def test_nesting_deeper_than_the_decoder_allows_is_not_json() -> None:
    assert load_json_text("[" * 100_000 + "]" * 100_000) is NOT_JSON


def test_duplicate_keys_keep_the_last_value() -> None:
    assert load_json_text('{"a":1,"a":2}') == {"a": 2}

"""Reading a body as JSON text, exactly as JavaScript's JSON.parse reads it.

The standard library's decoder is used rather than orjson because it agrees with JSON.parse where
orjson does not: `1e400` is a number (Infinity) to JavaScript, so a message holding it is an invalid
message, not "not JSON". On top of the decoder:
- `NaN`, `Infinity` and `-Infinity` are refused (Python accepts them by default);
- bytes must be strict UTF-8 (no auto-detected UTF-16/32, no encoded surrogates, no overlong forms):
  invalid UTF-8 cannot reach a store through SQS at all, so this is our reading, not JSON.parse's;
- a str is read as JSON.parse reads a JavaScript string, lone surrogate code points included: inside a
  JSON string one is an ordinary character (the text is JSON, and the schema's text rule refuses the
  string, so INVALID_MESSAGE in both twins), outside one it is a syntax error (NOT_JSON in both);
- a byte order mark is refused (JSON.parse refuses U+FEFF: it is not JSON whitespace);
- duplicate keys: the last one wins, as in JSON.parse and System.Text.Json (our reading);
- a lone-surrogate escape (`"\\ud800"`) is read, as JSON.parse reads it: the body is JSON, and the
  schema (and the models) refuse the string, so the verdict is INVALID_MESSAGE in every twin;
- nesting: JSON.parse reads any depth, and no message of the contract puts a container inside another.
  So a body whose containers nest is never handed to the (recursive) decoder: an iterative check of its
  syntax answers `NESTED` (JSON, and so an invalid message) or `NOT_JSON`. The verdict is the same at
  any depth and whatever the caller's stack depth; the recursion limit never decides it.
Failure is a sentinel, never an exception, so that no decoder error (which quotes the input) can end up
chained to the caller's error.
"""

from __future__ import annotations

__all__ = ["NESTED", "NOT_JSON", "is_json_text", "load_json_text", "nesting_depth"]

import json
import re
from itertools import accumulate
from typing import Final, NoReturn


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


NOT_JSON: Final = _Sentinel("NOT_JSON")
# JSON text whose containers nest (an object or array inside another): never a valid message.
NESTED: Final = _Sentinel("NESTED")

# Python refuses int() of more than 4300 digits; JavaScript reads any JSON number as a double. Past
# this length no integer can be valid anywhere in the contract, so read it as JavaScript would.
_LONGEST_EXACT_INTEGER = 100
# A valid message is one object of scalars: depth 1. Anything deeper is checked, not decoded.
_DEEPEST_DECODED = 1

# JSON's tokens (RFC 8259), each after optional JSON whitespace. A string is written unrolled, so the
# regex engine never backtracks through it.
_CHAR = r'[^"\\\x00-\x1f]'
_ESCAPE = r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})'
_TOKEN = re.compile(
    r"[ \t\n\r]*(?:"
    r"(?P<open>[\[{])|(?P<close>[\]}])|(?P<colon>:)|(?P<comma>,)"
    rf'|(?P<string>"{_CHAR}*(?:{_ESCAPE}{_CHAR}*)*")'
    r"|(?P<scalar>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)"
    r")"
)
_TRAILING_WHITESPACE = re.compile(r"[ \t\n\r]*\Z")
# Strings hide brackets from the depth count; an unterminated one runs to the end of the text (so the
# match never fails, and never backtracks).
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _refuse_constant(_name: str) -> NoReturn:
    raise ValueError("NaN and Infinity are not JSON")


def _parse_int(text: str) -> int | float:
    return int(text) if len(text) <= _LONGEST_EXACT_INTEGER else float(text)


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_parse_int)


def nesting_depth(text: str) -> int:
    """How deep the text's brackets nest, outside strings (an upper bound for text that is not JSON)."""
    brackets = _BRACKETS.findall(_STRINGS.sub("", text))
    return max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)


def is_json_text(text: str) -> bool:
    """Whether `text` is one JSON value (RFC 8259, as JSON.parse reads it), checked without recursion."""
    containers: list[str] = []  # "[" or "{", innermost last
    expect = "value"  # value | value-or-close | key | key-or-close | colon | comma-or-close | end
    position = 0
    length = len(text)
    while True:
        if expect == "end":
            return _TRAILING_WHITESPACE.match(text, position) is not None
        token = _TOKEN.match(text, position)
        if token is None or position >= length:
            return False
        position = token.end()
        kind = token.lastgroup
        if expect in ("value", "value-or-close"):
            if kind == "open":
                containers.append(token.group(kind))
                expect = "key-or-close" if containers[-1] == "{" else "value-or-close"
                continue
            if expect == "value-or-close" and kind == "close":
                if token.group(kind) != "]":
                    return False
                containers.pop()
            elif kind not in ("string", "scalar"):
                return False
        elif expect in ("key", "key-or-close"):
            if kind == "string":
                expect = "colon"
                continue
            if expect != "key-or-close" or kind != "close" or token.group(kind) != "}":
                return False
            containers.pop()
        elif expect == "colon":
            if kind != "colon":
                return False
            expect = "value"
            continue
        else:  # comma-or-close
            if kind == "comma":
                expect = "key" if containers[-1] == "{" else "value"
                continue
            if kind != "close" or token.group(kind) != ("}" if containers[-1] == "{" else "]"):
                return False
            containers.pop()
        # A value (or a container) has ended.
        expect = "comma-or-close" if containers else "end"


def load_json_text(body: object) -> object:
    """The JSON value of `body` (str, or UTF-8 bytes); `NESTED` for JSON text whose containers nest
    (never a valid message); or `NOT_JSON`."""
    if isinstance(body, bytes | bytearray | memoryview):
        try:
            text = bytes(body).decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            return NOT_JSON
    elif isinstance(body, str):
        text = body
    else:
        return NOT_JSON
    if text.startswith("\ufeff"):
        return NOT_JSON
    if nesting_depth(text) > _DEEPEST_DECODED:
        return NESTED if is_json_text(text) else NOT_JSON
    try:
        return _DECODER.decode(text)
    except ValueError:  # JSONDecodeError is a ValueError
        return NOT_JSON

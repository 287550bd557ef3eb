"""Reading a body as JSON text, refusing what JavaScript's JSON.parse refuses.

The standard library's decoder is used rather than orjson because it agrees with JSON.parse where
orjson does not: `1e400` is a number (Infinity) to JavaScript, so a message holding it is an invalid
message, not "not JSON". On top of the decoder:
- `NaN`, `Infinity` and `-Infinity` are refused (Python accepts them by default);
- bytes must be strict UTF-8 (no auto-detected UTF-16/32, no encoded surrogates, no overlong forms);
- a byte order mark is refused (JSON.parse refuses U+FEFF: it is not JSON whitespace);
- duplicate keys: the last one wins, as in JSON.parse and System.Text.Json (our reading);
- a string holding a lone surrogate (written `\\ud800`, or present in a Python str) is refused, as
  System.Text.Json and I-JSON (RFC 7493) refuse it; JSON.parse accepts it (our reading, to reconcile);
- nesting deeper than the decoder's recursion limit is refused as not JSON (our reading: JSON.parse may
  read it, and then refuse it as an invalid message; no valid message is nested at all).
Failure is a sentinel, never an exception, so that no decoder error (which quotes the input) can end up
chained to the caller's error.
"""

from __future__ import annotations

__all__ = ["NOT_JSON", "load_json_text"]

import json
import re
from typing import Final, NoReturn


class _NotJson:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_JSON"


NOT_JSON: Final = _NotJson()

# Python refuses int() of more than 4300 digits; JavaScript reads any JSON number as a double. Past
# this length no integer can be valid anywhere in the contract, so read it as JavaScript would.
_LONGEST_EXACT_INTEGER = 100
_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_constant(_name: str) -> NoReturn:
    raise ValueError("NaN and Infinity are not JSON")


def _parse_int(text: str) -> int | float:
    return int(text) if len(text) <= _LONGEST_EXACT_INTEGER else float(text)


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_parse_int)


def _holds_lone_surrogate(value: object) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def load_json_text(body: object) -> object:
    """The JSON value of `body` (str, or UTF-8 bytes), or `NOT_JSON`."""
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
    try:
        value = _DECODER.decode(text)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return NOT_JSON
    if _holds_lone_surrogate(value):
        return NOT_JSON
    return value

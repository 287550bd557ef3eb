"""Whether a stored stream record (quarantined, parked or dead-lettered) belongs to an erased user, on
any content.

A record that decodes (`pipeline.decode.decode_record`) belongs to the user its event names. A record
that does not decode, whatever the decoder raised (`DecodeError`, `RecursionError`, `MemoryError`, ...),
or whose event names no user, cannot be ruled out by a typed reading, so it is matched on its content
against the erased keys: each user id, its partition key `USER#<id>`, and the Array account ids the
erasure found in the user's rows with the keys built from them. Matching is precise, so that a short key
(`1`, `a`) never takes another user's record with it:

- **Bytes that parse as JSON** are matched on whole values: a string equal to a key, or a number equal to
  a key read as a JSON number (`1` for the key `"1"`), never a substring. A string that is itself JSON
  text (JSON written inside a JSON string) is parsed and walked in turn, up to `UNESCAPE_ROUNDS` deep; a
  string that is not, but holds a bracket or a quote (a piece of broken JSON), is read as text below.
  The values of the stream's own envelope fields (`eventID`, `SequenceNumber`, `SizeBytes`, ...) are
  written by DynamoDB Streams, never hold an id, and are skipped.
- **Bytes that do not parse as JSON** (or whose parse needs more nesting than Python's recursion allows)
  are matched on the key bounded at both ends by characters that cannot be part of an id (anything but
  `A-Z a-z 0-9 . _ : -`, the service's user-id alphabet, so `#`, quotes, spaces and the ends of the
  text bound a key; `12` and `user-1x` do not hold `1`). The text is read as is and JSON-unescaped (a
  linear scan that replaces `\\uXXXX`, surrogate pairs, `\\n`, ... wherever they stand), repeated while
  the scan changes it, up to `UNESCAPE_ROUNDS` times; a text that still changes after that cannot be
  ruled out and matches.

`KeysByUser` answers whose a record is, for a batch of users: one match against every key of the batch,
and, only for a record that matches, one per user (a bounded match of one key can hide another's), so
each user's count of what was removed or found is theirs, not the batch's. A record that matches the
batch and no user alone (a text that cannot be ruled out) is every user's.
"""

from __future__ import annotations

__all__ = ["UNESCAPE_ROUNDS", "ErasedKeys", "KeysByUser", "json_unescaped"]

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from pipeline import decode_record
from schema.table import ENTITLEMENT_SK_PREFIX, GSI1_PK_PREFIX, STALE_SK_PREFIX, user_pk

UNESCAPE_ROUNDS = 4

_ESCAPE = re.compile(
    r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"  # a surrogate pair
    r"|\\u([0-9a-fA-F]{4})"
    r'|\\(["\\/bfnrt])'
)
# The service's user-id alphabet (service.app.USER_ID_PATTERN) and Array's ids: a key is bounded by
# anything else, so a match never sits inside a longer id.
_ID_CHARACTERS = "A-Za-z0-9._:-"
# Written by DynamoDB Streams itself, never holding an id: a short key must not match a size or a version.
_ENVELOPE_FIELDS = frozenset(
    {
        "eventID",
        "eventName",
        "eventVersion",
        "eventSource",
        "awsRegion",
        "ApproximateCreationDateTime",
        "SequenceNumber",
        "SizeBytes",
        "StreamViewType",
        "userIdentity",
    }
)
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_BROKEN_JSON_HINT = re.compile(r'[{}\[\]"]')
_NOT_JSON = object()
_SHORT = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(match: re.Match[str]) -> str:
    high, low, single, short = match.groups()
    if high is not None:
        return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    if single is not None:
        return chr(int(single, 16))  # a lone surrogate stays one code point: it matches no key
    return _SHORT[short]


def json_unescaped(text: str) -> str:
    """`text` with every JSON escape replaced by the character it stands for (one round)."""
    return _ESCAPE.sub(_unescape, text) if "\\" in text else text


def _number(text: str) -> Decimal:
    return Decimal(text)


def _parsed(raw: bytes) -> object:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _NOT_JSON
    return _parsed_text(text)


def _parsed_text(text: str) -> object:
    """The JSON value of `text`, numbers as Decimal (so `1` and `1.0` are one number), or `_NOT_JSON`."""
    try:
        return json.loads(text, parse_float=Decimal, parse_int=Decimal, parse_constant=_constant)
    except (ValueError, RecursionError, InvalidOperation):
        return _NOT_JSON


def _constant(_name: str) -> object:
    raise ValueError("NaN and Infinity are not JSON")


@dataclass(frozen=True, slots=True)
class ErasedKeys:
    """The users being erased, and every key a record of theirs can be recognised by."""

    user_ids: frozenset[str]
    texts: tuple[str, ...]
    numbers: frozenset[Decimal]
    bounded: re.Pattern[str] | None

    @classmethod
    def of(cls, user_ids: Iterable[str], array_account_ids: Iterable[str] = ()) -> ErasedKeys:
        ids = frozenset(user_id for user_id in user_ids if user_id)
        texts: list[str] = []
        for user_id in sorted(ids):
            texts += [user_pk(user_id), user_id]
        for account in sorted(frozenset(a for a in array_account_ids if a)):
            texts += [
                f"{ENTITLEMENT_SK_PREFIX}{account}",
                f"{STALE_SK_PREFIX}{account}",
                f"{GSI1_PK_PREFIX}{account}",
                account,
            ]
        unique = tuple(dict.fromkeys(texts))
        numbers = frozenset(_number(text) for text in unique if _JSON_NUMBER.fullmatch(text))
        bounded = (
            re.compile(
                f"(?<![{_ID_CHARACTERS}])(?:"
                + "|".join(re.escape(text) for text in sorted(unique, key=len, reverse=True))
                + f")(?![{_ID_CHARACTERS}])"
            )
            if unique
            else None
        )
        return cls(ids, unique, numbers, bounded)

    def __bool__(self) -> bool:
        return bool(self.user_ids)

    def named_in(self, raw: bytes) -> bool:
        """Whether the bytes name one of the keys: on whole JSON values when they parse as JSON, else
        bounded in their text and its JSON-unescaped forms (module docstring)."""
        if not self:
            return False
        value = _parsed(raw)
        if value is _NOT_JSON:
            return self._bounded_in(raw.decode("utf-8", "surrogateescape"))
        return self._in_value(value, UNESCAPE_ROUNDS)

    def _in_value(self, value: object, rounds: int) -> bool:
        """Whether a parsed JSON value holds a key as a whole value (walked without recursion)."""
        pending = [value]
        while pending:
            current = pending.pop()
            if isinstance(current, dict):
                pending.extend(v for k, v in current.items() if k not in _ENVELOPE_FIELDS)
            elif isinstance(current, list):
                pending.extend(current)
            elif isinstance(current, Decimal):
                if current in self.numbers:
                    return True
            elif isinstance(current, str) and (current in self.texts or self._in_string(current, rounds)):
                return True
        return False

    def _in_string(self, text: str, rounds: int) -> bool:
        """A string value that is JSON text itself is walked; one that is a piece of broken JSON is read
        as text; any other string is a whole value that equals no key."""
        if _BROKEN_JSON_HINT.search(text) is None:
            return False
        if rounds <= 0:
            return True  # JSON nested deeper than we read: cannot be ruled out
        inner = _parsed_text(text)
        if inner is _NOT_JSON:
            return self._bounded_in(text)
        return self._in_value(inner, rounds - 1)

    def _bounded_in(self, text: str) -> bool:
        """Whether the text, or one of its JSON-unescaped forms, holds a key bounded at both ends."""
        assert self.bounded is not None
        if self.bounded.search(text):
            return True
        for _ in range(UNESCAPE_ROUNDS):
            unescaped = json_unescaped(text)
            if unescaped == text:
                return False
            if self.bounded.search(unescaped):
                return True
            text = unescaped
        return json_unescaped(text) != text  # still changing: cannot be ruled out

    def record_belongs(self, raw: bytes, *, stream_arn: str, shard_id: str, sequence_number: str) -> bool:
        """Whether a stored stream record is one of these users' (module docstring). Never raises."""
        try:
            event = decode_record(
                raw, stream_arn=stream_arn, shard_id=shard_id, sequence_number=sequence_number
            )
            user_id = event.user_id
        except Exception:  # anything a record makes the decoder raise: read its content instead
            user_id = None
        if user_id is not None:
            return user_id in self.user_ids
        return self.named_in(raw)


@dataclass(frozen=True, slots=True)
class KeysByUser:
    """A batch's keys (`every`) and each user's own (`each`), to tell whose a matching record is."""

    every: ErasedKeys
    each: Mapping[str, ErasedKeys]

    @classmethod
    def of(
        cls, user_ids: Iterable[str], accounts_of: Mapping[str, Iterable[str]] | None = None
    ) -> KeysByUser:
        """`accounts_of`: the Array accounts found in each user's rows (matched as that user's keys)."""
        accounts = accounts_of or {}
        ids = sorted({user_id for user_id in user_ids if user_id})
        every = ErasedKeys.of(ids, [a for user_id in ids for a in accounts.get(user_id, ())])
        return cls(every, {user_id: ErasedKeys.of([user_id], accounts.get(user_id, ())) for user_id in ids})

    def __bool__(self) -> bool:
        return bool(self.every)

    def owners(self, matches: Callable[[ErasedKeys], bool]) -> frozenset[str]:
        """The users whose keys `matches`: none unless the batch's keys match; then each user's."""
        if not matches(self.every):
            return frozenset()
        if len(self.each) == 1:
            return frozenset(self.each)
        owners = frozenset(user_id for user_id, keys in self.each.items() if matches(keys))
        return owners or frozenset(self.each)  # matched by the batch, by none alone: cannot be ruled out

    def record_owners(
        self, raw: bytes, *, stream_arn: str, shard_id: str, sequence_number: str
    ) -> frozenset[str]:
        """The users a stored stream record belongs to (`ErasedKeys.record_belongs`, per user)."""
        try:
            event = decode_record(
                raw, stream_arn=stream_arn, shard_id=shard_id, sequence_number=sequence_number
            )
            user_id = event.user_id
        except Exception:  # anything a record makes the decoder raise: read its content instead
            user_id = None
        if user_id is not None:
            return frozenset({user_id}) if user_id in self.each else frozenset()
        return self.owners(lambda keys: keys.named_in(raw))

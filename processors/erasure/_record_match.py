"""Whether a stored stream record (quarantined, parked or dead-lettered) belongs to an erased user, on
any content.

A record that decodes (`pipeline.decode.decode_record`) belongs to the user its event names. A record
that does not decode, whatever the decoder raised (`DecodeError`, `RecursionError`, `MemoryError`, ...),
or whose event names no user, cannot be ruled out by a typed reading, so it is matched on its content
against the erased keys: each user id, its partition key `USER#<id>`, and the Array account ids the
erasure found in the user's rows with the keys built from them. It belongs when its bytes, or their
JSON-unescaped text, contain one of them.

The unescaped text comes from a linear scan that replaces JSON escapes (`\\uXXXX`, surrogate pairs,
`\\n`, ...) wherever they stand: no parse, so no nesting limit applies, and text outside a string (in a
record that is not JSON) is read too. The scan is repeated while it changes the text (JSON written inside
a JSON string), up to `UNESCAPE_ROUNDS` times; a text that still changes after that cannot be ruled out
and matches. A key is matched as a substring, so an id inside a longer one matches too: over-matching is
the safe side for an erasure, and the only one a record that cannot be read allows.
"""

from __future__ import annotations

__all__ = ["UNESCAPE_ROUNDS", "ErasedKeys", "json_unescaped"]

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.decode import decode_record
from schema.table import ENTITLEMENT_SK_PREFIX, GSI1_PK_PREFIX, STALE_SK_PREFIX, user_pk

UNESCAPE_ROUNDS = 4

_ESCAPE = re.compile(
    r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"  # a surrogate pair
    r"|\\u([0-9a-fA-F]{4})"
    r'|\\(["\\/bfnrt])'
)
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


@dataclass(frozen=True, slots=True)
class ErasedKeys:
    """The users being erased, and every key a record of theirs can be recognised by."""

    user_ids: frozenset[str]
    texts: tuple[str, ...]
    raw_needles: tuple[bytes, ...]

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
        return cls(ids, unique, tuple(text.encode("utf-8", "surrogatepass") for text in unique))

    def __bool__(self) -> bool:
        return bool(self.user_ids)

    def named_in(self, raw: bytes) -> bool:
        """Whether the bytes, or their JSON-unescaped text, contain one of the keys."""
        if any(needle in raw for needle in self.raw_needles):
            return True
        text = raw.decode("utf-8", "surrogateescape")
        for _ in range(UNESCAPE_ROUNDS):
            unescaped = json_unescaped(text)
            if unescaped == text:
                return False
            if any(key in unescaped for key in self.texts):
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

"""Address keys and quarantine addresses, exactly as the contract defines them.

`address_key` lowercases A to Z and nothing else, because Unicode lowercasing differs between
JavaScript, .NET, Postgres and Python (`"\u212a".lower()` is `"k"` in Python; here the Kelvin sign
stays a Kelvin sign). Every store compares addresses through it.
"""

from __future__ import annotations

__all__ = ["address_key", "is_quarantine_address", "quarantine_address"]

import re

from schema.erasure._errors import ErasureValueError

_ASCII_UPPER_TO_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

# fullmatch, so neither end can be padded (a trailing newline included); re.ASCII is moot with
# explicit ranges but states the intent.
_HOLD_ID = re.compile(r"[a-z0-9-]{1,64}", re.ASCII)
_QUARANTINE_PREFIX = "quarantine+"
_QUARANTINE_DOMAIN = "@erasure.invalid"


def address_key(raw: str) -> str:
    """Lowercase A to Z; leave every other character as typed."""
    return raw.translate(_ASCII_UPPER_TO_LOWER)


def quarantine_address(hold_id: str) -> str:
    """`quarantine+<hold_id>@erasure.invalid`, where a pending erasure parks address-keyed rows.

    Raises `ErasureValueError` (a ValueError) unless hold_id is 1 to 64 of a-z, 0-9 and '-'.
    """
    if not isinstance(hold_id, str) or _HOLD_ID.fullmatch(hold_id) is None:
        raise ErasureValueError("hold id must be 1 to 64 of a-z, 0-9 and '-'")
    return f"{_QUARANTINE_PREFIX}{hold_id}{_QUARANTINE_DOMAIN}"


def is_quarantine_address(address: str) -> bool:
    """Whether `address` is exactly one that `quarantine_address` returns: lower-case
    `quarantine+<hold_id>@erasure.invalid` with a valid hold id, nothing before or after it. A copy with
    A to Z in it is not one (the erasure contract's "one of those"; an address key never holds A to Z
    anyway)."""
    if not isinstance(address, str):
        return False
    if not (address.startswith(_QUARANTINE_PREFIX) and address.endswith(_QUARANTINE_DOMAIN)):
        return False
    hold_id = address[len(_QUARANTINE_PREFIX) : -len(_QUARANTINE_DOMAIN)]
    return _HOLD_ID.fullmatch(hold_id) is not None

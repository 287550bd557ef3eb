"""Facts of the DynamoDB stream record format that every decoding path (`pipeline.decode`) reads alike."""

from __future__ import annotations

__all__ = [
    "CHANGES",
    "EXACT_MILLIS_LIMIT",
    "INSERT",
    "MODIFY",
    "REMOVE",
    "TTL_IDENTITY_TYPE",
    "TTL_PRINCIPAL",
]

from typing import Final

from pipeline.events import ChangeKind

# The identity DynamoDB's TTL gives the REMOVE records of the items it expires.
TTL_IDENTITY_TYPE: Final = "Service"
TTL_PRINCIPAL: Final = "dynamodb.amazonaws.com"

# The members as module globals: the hot paths compare with `is`, and a member lookup on the class
# costs ~70 ns on Python 3.11.
INSERT: Final = ChangeKind.INSERT
MODIFY: Final = ChangeKind.MODIFY
REMOVE: Final = ChangeKind.REMOVE
CHANGES: Final = {"INSERT": INSERT, "MODIFY": MODIFY, "REMOVE": REMOVE}

# Creation times in epoch milliseconds below this (2**32 s) convert exactly through a float: its error is
# under half a microsecond there and `datetime.fromtimestamp` rounds to the microsecond.
EXACT_MILLIS_LIMIT: Final = 2**32 * 1000

"""The local stack's direct table writes (the simulator's, and the planted faults'), as low-level
DynamoDB requests.

The write paths are the service's own, from `schema.table_writes` (the one definition of every item
shape and condition, which `service.dynamo` calls too); this module adds only what the local stack
writes that the service never does: an unconditional put, a consistent read of one row, and a row
marked Active on its own (a planted fault). Nothing here does I/O: each function returns the keyword
arguments of one boto3 call (PutItem, UpdateItem, GetItem) or the TransactItems of one
TransactWriteItems.
"""

from __future__ import annotations

__all__ = [
    "SAVE_IF_ACTIVE_CONDITION",
    "AttributeValue",
    "LowLevelItem",
    "business_time",
    "cancellation_record",
    "cancellation_transaction",
    "entitlement_row",
    "get_row",
    "mark_active",
    "reactivation_transaction",
    "save_if_active",
    "second_signup_transaction",
    "signup_put",
    "stale_record",
    "ttl_after",
    "unconditional_put",
]

from datetime import datetime
from typing import Any

from schema.table import EntitlementStatus, entitlement_key
from schema.table_writes import (
    SAVE_IF_ACTIVE_CONDITION,
    AttributeValue,
    LowLevelItem,
    business_time,
    cancellation_record,
    cancellation_transaction,
    entitlement_row,
    low_level,
    reactivation_transaction,
    second_signup_transaction,
    set_status,
    stale_record,
    ttl_after,
)
from schema.table_writes import save_if_active_request as save_if_active


def unconditional_put(table_name: str, image: LowLevelItem) -> dict[str, Any]:
    """A whole-item put with no condition."""
    return {"TableName": table_name, "Item": image}


# Signup: one unconditional write of a fresh row (it has nothing stale to overwrite).
signup_put = unconditional_put


def get_row(table_name: str, user_id: str, array_account_id: str) -> dict[str, Any]:
    return {
        "TableName": table_name,
        "Key": low_level(entitlement_key(user_id, array_account_id)),
        "ConsistentRead": True,
    }


def mark_active(table_name: str, user_id: str, array_account_id: str, *, now: datetime) -> dict[str, Any]:
    """The row half of a reactivation on its own (a planted fault: its delete never happened)."""
    return set_status(
        table_name,
        entitlement_key(user_id, array_account_id),
        to=EntitlementStatus.ACTIVE,
        require=None,
        now=now,
    )

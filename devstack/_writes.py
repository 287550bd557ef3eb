"""Pure builders of the entitlement service's writes, as low-level DynamoDB requests.

Every key and item shape comes from the table contract (`schema.table`). Nothing here does I/O: each
function returns the keyword arguments of one boto3 call (PutItem, UpdateItem, GetItem) or the list of
TransactItems of one TransactWriteItems.
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

from datetime import UTC, datetime, timedelta
from typing import Any

from schema.table import (
    EntitlementStatus,
    cancellation_key,
    entitlement_key,
    gsi1_key,
    stale_key,
)

AttributeValue = dict[str, Any]
LowLevelItem = dict[str, AttributeValue]

SAVE_IF_ACTIVE_CONDITION = "attribute_exists(pk) AND #status = :active"
_STATUS_NAMES = {"#status": "status"}


def _s(value: str) -> AttributeValue:
    return {"S": value}


def _n(value: int) -> AttributeValue:
    return {"N": str(value)}


def _low_level(plain: dict[str, str]) -> LowLevelItem:
    return {name: _s(value) for name, value in plain.items()}


def business_time(now: datetime) -> str:
    """createdAt / updatedAt: UTC, millisecond precision, `Z` suffix."""
    return now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ttl_after(now: datetime, days: int) -> int:
    """Epoch seconds `days` after `now`: the arithmetic DynamoDB's TTL reads, on (simulated) time."""
    return int((now + timedelta(days=days)).timestamp())


def entitlement_row(
    user_id: str,
    array_account_id: str,
    *,
    status: EntitlementStatus,
    processor_token: str,
    now: datetime,
) -> LowLevelItem:
    """A fresh entitlement row. Only entitlement rows carry the GSI1 attributes."""
    stamp = business_time(now)
    return _low_level(
        {
            **entitlement_key(user_id, array_account_id),
            **gsi1_key(array_account_id),
            "userId": user_id,
            "arrayAccountId": array_account_id,
            "status": status.value,
            "processorToken": processor_token,
            "createdAt": stamp,
            "updatedAt": stamp,
        }
    )


def _cleanup_record(
    key: dict[str, str], user_id: str, array_account_id: str, ttl: AttributeValue, now: datetime
) -> LowLevelItem:
    item = _low_level(
        {**key, "userId": user_id, "arrayAccountId": array_account_id, "createdAt": business_time(now)}
    )
    item["ttl"] = ttl
    return item


def cancellation_record(
    user_id: str, array_account_id: str, *, ttl: AttributeValue, now: datetime
) -> LowLevelItem:
    """On the user's single cancellation key, naming the account to delete."""
    return _cleanup_record(cancellation_key(user_id), user_id, array_account_id, ttl, now)


def stale_record(
    user_id: str, old_array_account_id: str, *, ttl: AttributeValue, now: datetime
) -> LowLevelItem:
    """On a key ending in the superseded account id, naming that account."""
    return _cleanup_record(stale_key(user_id, old_array_account_id), user_id, old_array_account_id, ttl, now)


def _key(plain: dict[str, str]) -> LowLevelItem:
    return _low_level(plain)


def signup_put(table_name: str, row: LowLevelItem) -> dict[str, Any]:
    """Signup: one unconditional write of a fresh row (it has nothing stale to overwrite)."""
    return {"TableName": table_name, "Item": row}


def unconditional_put(table_name: str, image: LowLevelItem) -> dict[str, Any]:
    return {"TableName": table_name, "Item": image}


def get_row(table_name: str, user_id: str, array_account_id: str) -> dict[str, Any]:
    return {
        "TableName": table_name,
        "Key": _key(entitlement_key(user_id, array_account_id)),
        "ConsistentRead": True,
    }


def save_if_active(table_name: str, image: LowLevelItem) -> dict[str, Any]:
    """dynamo.SaveIfActive: put back exactly the image read, only if the row still exists and is Active."""
    return {
        "TableName": table_name,
        "Item": image,
        "ConditionExpression": SAVE_IF_ACTIVE_CONDITION,
        "ExpressionAttributeNames": dict(_STATUS_NAMES),
        "ExpressionAttributeValues": {":active": _s(EntitlementStatus.ACTIVE.value)},
    }


def _set_status(
    table_name: str,
    key: dict[str, str],
    *,
    to: EntitlementStatus,
    require: EntitlementStatus | None,
    now: datetime,
) -> dict[str, Any]:
    update: dict[str, Any] = {
        "TableName": table_name,
        "Key": _key(key),
        "UpdateExpression": "SET #status = :to, updatedAt = :now",
        "ExpressionAttributeNames": dict(_STATUS_NAMES),
        "ExpressionAttributeValues": {":to": _s(to.value), ":now": _s(business_time(now))},
        "ConditionExpression": "attribute_exists(pk)",
    }
    if require is not None:
        update["ConditionExpression"] = "attribute_exists(pk) AND #status = :from"
        update["ExpressionAttributeValues"][":from"] = _s(require.value)
    return update


def cancellation_transaction(
    table_name: str,
    user_id: str,
    array_account_id: str,
    *,
    ttl: AttributeValue,
    now: datetime,
) -> list[dict[str, Any]]:
    """Cancellation: row Cancelled + the cancellation record naming the account, in one transaction."""
    return [
        {
            "Update": _set_status(
                table_name,
                entitlement_key(user_id, array_account_id),
                to=EntitlementStatus.CANCELLED,
                require=EntitlementStatus.ACTIVE,
                now=now,
            )
        },
        {
            "Put": {
                "TableName": table_name,
                "Item": cancellation_record(user_id, array_account_id, ttl=ttl, now=now),
            }
        },
    ]


def reactivation_transaction(
    table_name: str, user_id: str, array_account_id: str, *, now: datetime
) -> list[dict[str, Any]]:
    """Reactivation: delete the cancellation record (the service's only delete) + row Active again."""
    return [
        {
            "Delete": {
                "TableName": table_name,
                "Key": _key(cancellation_key(user_id)),
                "ConditionExpression": "attribute_exists(pk)",
            }
        },
        {
            "Update": _set_status(
                table_name,
                entitlement_key(user_id, array_account_id),
                to=EntitlementStatus.ACTIVE,
                require=EntitlementStatus.CANCELLED,
                now=now,
            )
        },
    ]


def second_signup_transaction(
    table_name: str,
    user_id: str,
    *,
    old_array_account_id: str,
    new_row: LowLevelItem,
    stale_ttl: AttributeValue,
    now: datetime,
) -> list[dict[str, Any]]:
    """Second Array signup: new Active row, the old row Superseded, a stale record on the old account."""
    return [
        {"Put": {"TableName": table_name, "Item": new_row}},
        {
            "Update": _set_status(
                table_name,
                entitlement_key(user_id, old_array_account_id),
                to=EntitlementStatus.SUPERSEDED,
                require=EntitlementStatus.ACTIVE,
                now=now,
            )
        },
        {
            "Put": {
                "TableName": table_name,
                "Item": stale_record(user_id, old_array_account_id, ttl=stale_ttl, now=now),
            }
        },
    ]


def mark_active(table_name: str, user_id: str, array_account_id: str, *, now: datetime) -> dict[str, Any]:
    """The row half of a reactivation on its own (a planted fault: its delete never happened)."""
    return _set_status(
        table_name,
        entitlement_key(user_id, array_account_id),
        to=EntitlementStatus.ACTIVE,
        require=None,
        now=now,
    )

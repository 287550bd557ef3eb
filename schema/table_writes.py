"""The table's write requests, as low-level DynamoDB requests: the one definition of every write path's
item shapes and conditions (docs/table.md), for the service (`service.dynamo`, which makes the calls)
and the local stack (`devstack._writes`, the simulator's and the planted faults' direct writes).

Every key and item shape comes from the table contract (`schema.table`). Nothing here does I/O: each
function returns the keyword arguments of one boto3 call (PutItem, UpdateItem) or the TransactItems of
one TransactWriteItems. Low-level images (`{"S": ...}` attribute values) are kept as DynamoDB returns
them. An image may hold a processor token: never log one.
"""

from __future__ import annotations

__all__ = [
    "IDEMPOTENCY_IN_FLIGHT",
    "IDEMPOTENCY_RELEASED",
    "SAVE_IF_ACTIVE_CONDITION",
    "AttributeValue",
    "LowLevelItem",
    "attribute",
    "business_time",
    "cancellation_record",
    "cancellation_transaction",
    "entitlement_row",
    "guard_update",
    "idempotency_answer",
    "idempotency_claim",
    "lost_race_schedule",
    "low_level",
    "new_row_put",
    "reactivation_transaction",
    "retire_transaction",
    "save_if_active_request",
    "second_signup_transaction",
    "set_status",
    "signup_transaction",
    "stale_record",
    "ttl_after",
]

from datetime import UTC, datetime, timedelta
from typing import Any

from schema.table import (
    EntitlementStatus,
    cancellation_key,
    entitlement_key,
    gsi1_key,
    guard_key,
    idempotency_key,
    stale_key,
)

AttributeValue = dict[str, Any]
LowLevelItem = dict[str, AttributeValue]

SAVE_IF_ACTIVE_CONDITION = "attribute_exists(pk) AND #status = :active"
_STATUS = {"#status": "status"}


def _s(value: str) -> AttributeValue:
    return {"S": value}


def low_level(plain: dict[str, str]) -> LowLevelItem:
    """String attributes (a key, an item) as low-level attribute values."""
    return {name: _s(value) for name, value in plain.items()}


def attribute(image: LowLevelItem, name: str) -> str | None:
    """A string attribute of a low-level image, or None."""
    value = image.get(name)
    return value.get("S") if isinstance(value, dict) else None


def business_time(now: datetime) -> str:
    """createdAt / updatedAt: UTC, millisecond precision, `Z` suffix."""
    return now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ttl_after(now: datetime, days: int) -> int:
    """Epoch seconds `days` after `now`: a top-level Number of epoch seconds, what DynamoDB's TTL reads."""
    return int((now + timedelta(days=days)).timestamp())


def entitlement_row(
    user_id: str,
    array_account_id: str,
    *,
    now: datetime,
    status: EntitlementStatus = EntitlementStatus.ACTIVE,
    processor_token: str | None = None,
) -> LowLevelItem:
    """A fresh entitlement row (Active unless told). Only entitlement rows carry the GSI1 attributes; no
    row carries a ttl (docs/table.md: only cleanup records do)."""
    stamp = business_time(now)
    plain = {
        **entitlement_key(user_id, array_account_id),
        **gsi1_key(array_account_id),
        "userId": user_id,
        "arrayAccountId": array_account_id,
        "status": status.value,
        "createdAt": stamp,
        "updatedAt": stamp,
    }
    if processor_token is not None:
        plain["processorToken"] = processor_token
    return low_level(plain)


def _ttl_value(ttl: int | AttributeValue) -> AttributeValue:
    # An int is epoch seconds (a Number); an attribute value is written as given (planted faults).
    return {"N": str(ttl)} if isinstance(ttl, int) else ttl


def _cleanup_record(
    key: dict[str, str], user_id: str, account: str, ttl: int | AttributeValue, now: datetime
) -> LowLevelItem:
    item = low_level({**key, "userId": user_id, "arrayAccountId": account, "createdAt": business_time(now)})
    item["ttl"] = _ttl_value(ttl)
    return item


def cancellation_record(
    user_id: str, array_account_id: str, *, ttl: int | AttributeValue, now: datetime
) -> LowLevelItem:
    """On the user's single cancellation key, naming the account to delete."""
    return _cleanup_record(cancellation_key(user_id), user_id, array_account_id, ttl, now)


def stale_record(
    user_id: str, old_array_account_id: str, *, ttl: int | AttributeValue, now: datetime
) -> LowLevelItem:
    """On the key ending in the superseded account id, naming that account."""
    return _cleanup_record(stale_key(user_id, old_array_account_id), user_id, old_array_account_id, ttl, now)


def guard_update(
    table_name: str, user_id: str, *, version: int, now: datetime, token: str | None = None
) -> dict[str, Any]:
    """The user's guard moved from `version` (the one read; 0 when there was no guard item) to the next,
    as one item of a write path's transaction: of two transactions that read the same version, one
    commits and the other is refused (ConditionalCheckFailed on this item), whatever the timing and
    however many service processes make them. `token` (`lastWrite`): names this write, so that a
    request whose transaction landed but whose answer was lost can tell, reading the guard back, that
    the write was its own."""
    update: dict[str, Any] = {
        "TableName": table_name,
        "Key": low_level(guard_key(user_id)),
        "UpdateExpression": "SET #version = :next, userId = :user, updatedAt = :now",
        "ExpressionAttributeNames": {"#version": "version"},
        "ExpressionAttributeValues": {
            ":next": {"N": str(version + 1)},
            ":user": _s(user_id),
            ":now": _s(business_time(now)),
        },
    }
    if token is not None:
        update["UpdateExpression"] += ", lastWrite = :token"
        update["ExpressionAttributeValues"][":token"] = _s(token)
    if version == 0:
        update["ConditionExpression"] = "attribute_not_exists(pk)"
    else:
        update["ConditionExpression"] = "#version = :read"
        update["ExpressionAttributeValues"][":read"] = {"N": str(version)}
    return {"Update": update}


def _guarded(
    table_name: str,
    user_id: str,
    guard_version: int | None,
    items: list[dict[str, Any]],
    *,
    now: datetime,
    token: str | None = None,
) -> list[dict[str, Any]]:
    # The guard leads the transaction: its refusal is the first cancellation reason.
    if guard_version is None:  # the local stack's direct writes (planted faults) only
        return items
    return [guard_update(table_name, user_id, version=guard_version, now=now, token=token), *items]


def signup_transaction(
    table_name: str, user_id: str, row: LowLevelItem, *, guard_version: int, now: datetime
) -> list[dict[str, Any]]:
    """Signup: the guard moved on from the version read (the user's partition held no row then) + the
    fresh Active row (refused if a row for that account exists). Not the service design's "single
    unconditional write": two concurrent signups would each write an Active row (docs/table.md)."""
    return [
        guard_update(table_name, user_id, version=guard_version, now=now),
        {"Put": new_row_put(table_name, row)},
    ]


def lost_race_schedule(
    table_name: str, user_id: str, array_account_id: str, *, stale_ttl: int | AttributeValue, now: datetime
) -> list[dict[str, Any]]:
    """The account Array created for a request that then lost the user's guard to a concurrent one: a
    Superseded row naming it and the stale cleanup record on its key, so that only cleanup ever deletes
    it at Array and then marks that row Removed, as for any superseded account (with no row, cleanup's
    last step would find nothing to mark). Only while no row names that account (Array answered a
    concurrent request with the same account: it is the user's, not stale) and no cleanup record is on
    that key. No guard: the row is never Active, so it cannot make a second Active row."""
    row = entitlement_row(user_id, array_account_id, now=now, status=EntitlementStatus.SUPERSEDED)
    record = stale_record(user_id, array_account_id, ttl=stale_ttl, now=now)
    return [
        {"Put": new_row_put(table_name, row)},
        {"Put": {"TableName": table_name, "Item": record, "ConditionExpression": "attribute_not_exists(pk)"}},
    ]


def save_if_active_request(table_name: str, image: LowLevelItem) -> dict[str, Any]:
    """dynamo.SaveIfActive: a whole-item put of exactly `image`, only if the row exists and is Active."""
    return {
        "TableName": table_name,
        "Item": image,
        "ConditionExpression": SAVE_IF_ACTIVE_CONDITION,
        "ExpressionAttributeNames": dict(_STATUS),
        "ExpressionAttributeValues": {":active": _s(EntitlementStatus.ACTIVE.value)},
    }


def set_status(
    table_name: str,
    key: dict[str, str],
    *,
    to: EntitlementStatus,
    require: EntitlementStatus | None,
    now: datetime,
) -> dict[str, Any]:
    """An UpdateItem moving the row at `key` to `to`, only from `require` (from any status when None,
    which no write path of the service does: the local stack's planted faults)."""
    update: dict[str, Any] = {
        "TableName": table_name,
        "Key": low_level(key),
        "UpdateExpression": "SET #status = :to, updatedAt = :now",
        "ConditionExpression": "attribute_exists(pk)",
        "ExpressionAttributeNames": dict(_STATUS),
        "ExpressionAttributeValues": {":to": _s(to.value), ":now": _s(business_time(now))},
    }
    if require is not None:
        update["ConditionExpression"] = "attribute_exists(pk) AND #status = :from"
        update["ExpressionAttributeValues"][":from"] = _s(require.value)
    return update


def _leave_active(
    table_name: str,
    user_id: str,
    array_account_id: str,
    *,
    to: EntitlementStatus,
    record: LowLevelItem,
    now: datetime,
) -> list[dict[str, Any]]:
    """The Active row moved to `to` + the cleanup record naming its account, in one transaction."""
    row = entitlement_key(user_id, array_account_id)
    return [
        {"Update": set_status(table_name, row, to=to, require=EntitlementStatus.ACTIVE, now=now)},
        {"Put": {"TableName": table_name, "Item": record}},
    ]


def cancellation_transaction(
    table_name: str,
    user_id: str,
    array_account_id: str,
    *,
    ttl: int | AttributeValue,
    now: datetime,
    displacing: str | None = None,
    stale_ttl: int | AttributeValue | None = None,
    guard_version: int | None = None,
    token: str | None = None,
) -> list[dict[str, Any]]:
    """Cancellation: the Active row Cancelled + the cancellation record naming its account.

    The record's put never replaces a record naming another account (that account would lose its
    cleanup schedule): it requires no record on the key, or one naming this same account. `displacing`:
    the other account the user's cancellation record names (a second signup whose retire was refused
    kept its new row beside that record); the put then requires the record to still name it, and the
    same transaction schedules that account on its stale key (`stale_ttl`), so it stays scheduled.
    `guard_version`: the user's guard version read (the service always gives it; `_guarded`)."""
    record = cancellation_record(user_id, array_account_id, ttl=ttl, now=now)
    items = _leave_active(
        table_name, user_id, array_account_id, to=EntitlementStatus.CANCELLED, record=record, now=now
    )
    put = items[1]["Put"]
    if displacing is None:
        put["ConditionExpression"] = "attribute_not_exists(pk) OR arrayAccountId = :account"
        put["ExpressionAttributeValues"] = {":account": _s(array_account_id)}
        return _guarded(table_name, user_id, guard_version, items, now=now, token=token)
    if stale_ttl is None or displacing == array_account_id:
        raise ValueError("displacing names another account and needs its stale_ttl")
    put["ConditionExpression"] = "arrayAccountId = :displaced"
    put["ExpressionAttributeValues"] = {":displaced": _s(displacing)}
    stale = stale_record(user_id, displacing, ttl=stale_ttl, now=now)
    items = [*items, {"Put": {"TableName": table_name, "Item": stale}}]
    return _guarded(table_name, user_id, guard_version, items, now=now, token=token)


def reactivation_transaction(
    table_name: str,
    user_id: str,
    array_account_id: str,
    *,
    now: datetime,
    guard_version: int | None = None,
    token: str | None = None,
) -> list[dict[str, Any]]:
    """Reactivation: delete the cancellation record naming this account (the service's only delete) +
    the Cancelled row Active again."""
    row = entitlement_key(user_id, array_account_id)
    items: list[dict[str, Any]] = [
        {
            "Delete": {
                "TableName": table_name,
                "Key": low_level(cancellation_key(user_id)),
                "ConditionExpression": "attribute_exists(pk) AND arrayAccountId = :account",
                "ExpressionAttributeValues": {":account": _s(array_account_id)},
            }
        },
        {
            "Update": set_status(
                table_name, row, to=EntitlementStatus.ACTIVE, require=EntitlementStatus.CANCELLED, now=now
            )
        },
    ]
    return _guarded(table_name, user_id, guard_version, items, now=now, token=token)


def new_row_put(table_name: str, row: LowLevelItem) -> dict[str, Any]:
    """A new account's row: refused if a row for that account exists (never overwrite one)."""
    return {"TableName": table_name, "Item": row, "ConditionExpression": "attribute_not_exists(pk)"}


def retire_transaction(
    table_name: str,
    user_id: str,
    old_array_account_id: str,
    *,
    stale_ttl: int | AttributeValue,
    now: datetime,
) -> list[dict[str, Any]]:
    """The superseded row retired + the stale cleanup record on the key ending in its account id."""
    record = stale_record(user_id, old_array_account_id, ttl=stale_ttl, now=now)
    return _leave_active(
        table_name, user_id, old_array_account_id, to=EntitlementStatus.SUPERSEDED, record=record, now=now
    )


def second_signup_transaction(
    table_name: str,
    user_id: str,
    *,
    old_array_account_id: str,
    new_row: LowLevelItem,
    stale_ttl: int | AttributeValue,
    now: datetime,
    guard_version: int | None = None,
) -> list[dict[str, Any]]:
    """Second Array signup: the new Active row, the old row Superseded, the stale record, at once (after
    the user's guard, when `guard_version` is given)."""
    items = [
        {"Put": new_row_put(table_name, new_row)},
        *retire_transaction(table_name, user_id, old_array_account_id, stale_ttl=stale_ttl, now=now),
    ]
    return _guarded(table_name, user_id, guard_version, items, now=now)


# -- idempotency records ---------------------------------------------------------------------------------

IDEMPOTENCY_IN_FLIGHT = 0  # responseStatus of a claimed key whose request has not answered yet
IDEMPOTENCY_RELEASED = 1  # responseStatus of a key whose request failed transiently: a retry may claim it


def idempotency_claim(
    table_name: str,
    user_id: str,
    key_digest: str,
    request_digest: str,
    *,
    ttl: int,
    now: datetime,
    stale_before: datetime,
) -> dict[str, Any]:
    """A PutItem claiming an Idempotency-Key for one request: only when the key is new, released by a
    transient failure of the same request, or claimed by the same request that never answered (its
    process died) before `stale_before`."""
    item = low_level(
        {
            **idempotency_key(user_id, key_digest),
            "userId": user_id,
            "requestDigest": request_digest,
            "responseBody": "",
            "createdAt": business_time(now),
        }
    )
    item["responseStatus"] = {"N": str(IDEMPOTENCY_IN_FLIGHT)}
    item["ttl"] = {"N": str(ttl)}
    return {
        "TableName": table_name,
        "Item": item,
        "ConditionExpression": (
            "attribute_not_exists(pk) OR (requestDigest = :request AND (responseStatus = :released"
            " OR (responseStatus = :in_flight AND createdAt < :stale)))"
        ),
        "ExpressionAttributeValues": {
            ":request": _s(request_digest),
            ":released": {"N": str(IDEMPOTENCY_RELEASED)},
            ":in_flight": {"N": str(IDEMPOTENCY_IN_FLIGHT)},
            ":stale": _s(business_time(stale_before)),
        },
    }


def idempotency_answer(
    table_name: str, user_id: str, key_digest: str, *, status: int, body: str, created_at: str
) -> dict[str, Any]:
    """An UpdateItem storing the answer of the request that holds the claim made at `created_at` (a
    claim taken over since is not overwritten). `status` IDEMPOTENCY_RELEASED releases the key."""
    return {
        "TableName": table_name,
        "Key": low_level(idempotency_key(user_id, key_digest)),
        "UpdateExpression": "SET responseStatus = :status, responseBody = :body",
        "ConditionExpression": "createdAt = :claimed AND responseStatus = :in_flight",
        "ExpressionAttributeValues": {
            ":status": {"N": str(status)},
            ":body": _s(body),
            ":claimed": _s(created_at),
            ":in_flight": {"N": str(IDEMPOTENCY_IN_FLIGHT)},
        },
    }

"""The entitlements table's side of an erasure: every item under the user's partition key
(`USER#<userId>`: entitlement rows, the cancellation record, stale records, the service's guard and
idempotency records, anything unknown), the Array accounts they name, and batched deletes.

The guard (`#GUARD`) and the idempotency records (`IDEMPOTENCY#<digest>`: the first answer to a keyed
request, which names the user's account in its stored body) are the service's own bookkeeping: they go
with the other items (`other_keys`), so an erased user leaves nothing behind, not even a guard version.

Reads are strongly consistent. Deletes go in BatchWriteItem calls of at most 25 keys, each bounded by the
batch timeout; unprocessed keys are retried within the handler's deadline. Deleting a key that is already
gone is a no-op, so a redelivered step is harmless. boto3 errors are converted here, once.
"""

from __future__ import annotations

__all__ = ["UserKeys", "UserTable"]

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from processors.erasure._bounded import BoundedCalls, Deadline
from processors.erasure._clients import DynamoDBTableClient
from processors.erasure._errors import ErasureStepError, ErasureTimeoutError, converted
from schema.table import (
    ENTITLEMENT_SK_PREFIX,
    PK,
    SK,
    STALE_SK_PREFIX,
    ItemKind,
    item_kind,
    user_pk,
)

_BATCH_WRITE_MAX = 25
# DynamoDB refuses a partition key value over 2048 bytes (ValidationException, on reads too): no item
# can sit under a longer one, so the table is not asked about it. The contract allows any key length.
_PARTITION_KEY_MAX_BYTES = 2048
_RETRY_PAUSE_SECONDS = 0.05

Key = dict[str, dict[str, str]]


@dataclass(frozen=True)
class UserKeys:
    """The keys under one user's partition, by kind, and the Array accounts the items name."""

    entitlement_keys: tuple[Key, ...] = ()
    cleanup_keys: tuple[Key, ...] = ()
    other_keys: tuple[Key, ...] = ()  # the guard, idempotency records and anything unknown
    array_account_ids: tuple[str, ...] = field(default=())

    @property
    def empty(self) -> bool:
        return not (self.entitlement_keys or self.cleanup_keys or self.other_keys)


def _string(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    if isinstance(value, dict):
        text = value.get("S")
        if isinstance(text, str) and text:
            return text
    return None


def _account_named(item: dict[str, Any], sort_key: str) -> str | None:
    """The Array account an item names: its arrayAccountId, else the one its sort key ends in."""
    named = _string(item, "arrayAccountId")
    if named:
        return named
    for prefix in (ENTITLEMENT_SK_PREFIX, STALE_SK_PREFIX):
        if sort_key.startswith(prefix) and len(sort_key) > len(prefix):
            return sort_key[len(prefix) :]
    return None


def _keyable(user_id: str) -> bool:
    """Whether `USER#<user_id>` can be a partition key at all."""
    return len(user_pk(user_id).encode("utf-8")) <= _PARTITION_KEY_MAX_BYTES


class UserTable:
    """The table's calls an erasure makes, each bounded by the batch timeout and the deadline."""

    def __init__(
        self, dynamodb: DynamoDBTableClient, table_name: str, calls: BoundedCalls, batch_timeout: float
    ) -> None:
        self._dynamodb = dynamodb
        self._table = table_name
        self._calls = calls
        self._batch = batch_timeout

    def read(self, user_id: str, deadline: Deadline) -> UserKeys:
        """Every item under `USER#<user_id>` (all pages)."""
        if not _keyable(user_id):
            return UserKeys()
        entitlements: list[Key] = []
        cleanups: list[Key] = []
        others: list[Key] = []
        accounts: dict[str, None] = {}
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": PK, "#sk": SK, "#acct": "arrayAccountId"},
            "ExpressionAttributeValues": {":pk": {"S": user_pk(user_id)}},
            "ProjectionExpression": "#pk, #sk, #acct",
            "ConsistentRead": True,
        }
        while True:
            kwargs = dict(request)

            def page(kwargs: dict[str, Any] = kwargs) -> Any:
                with converted("table-read"):
                    return self._dynamodb.query(**kwargs)

            response = self._calls.call("table-read", page, deadline, self._batch)
            for item in response.get("Items", []):
                sort_key = _string(item, SK)
                partition_key = _string(item, PK)
                if sort_key is None or partition_key is None:
                    continue
                key: Key = {PK: {"S": partition_key}, SK: {"S": sort_key}}
                kind = item_kind(sort_key)
                if kind is ItemKind.ENTITLEMENT:
                    entitlements.append(key)
                elif kind in (ItemKind.CANCELLATION, ItemKind.STALE):
                    cleanups.append(key)
                else:  # the guard, idempotency records (service bookkeeping) and unknown items
                    others.append(key)
                account = _account_named(item, sort_key)
                if account is not None and kind is not ItemKind.UNKNOWN:
                    accounts[account] = None
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            request["ExclusiveStartKey"] = last
        return UserKeys(tuple(entitlements), tuple(cleanups), tuple(others), tuple(accounts))

    def has_items(self, user_id: str, deadline: Deadline) -> bool:
        """Whether any item sits under `USER#<user_id>` (one strongly consistent read of one key)."""
        if not _keyable(user_id):
            return False

        def probe() -> Any:
            with converted("table-read"):
                return self._dynamodb.query(
                    TableName=self._table,
                    KeyConditionExpression="#pk = :pk",
                    ExpressionAttributeNames={"#pk": PK},
                    ExpressionAttributeValues={":pk": {"S": user_pk(user_id)}},
                    ProjectionExpression="#pk",
                    ConsistentRead=True,
                    Limit=1,
                )

        response = self._calls.call("table-read", probe, deadline, self._batch)
        return bool(response.get("Items"))

    def delete(self, keys: Sequence[Key], deadline: Deadline, *, step: str) -> int:
        """Delete `keys` in batches of 25, each call bounded; returns how many keys were deleted."""
        pending: list[Key] = list(keys)
        while pending:
            chunk, pending = pending[:_BATCH_WRITE_MAX], pending[_BATCH_WRITE_MAX:]

            def write(chunk: list[Key] = chunk) -> Any:
                with converted(step):
                    return self._dynamodb.batch_write_item(
                        RequestItems={self._table: [{"DeleteRequest": {"Key": key}} for key in chunk]}
                    )

            response = self._calls.call(step, write, deadline, self._batch)
            unprocessed = (response.get("UnprocessedItems") or {}).get(self._table) or []
            if unprocessed:
                if deadline.remaining() < _RETRY_PAUSE_SECONDS * 2:
                    raise ErasureTimeoutError(step)
                time.sleep(_RETRY_PAUSE_SECONDS)
                retry = [entry["DeleteRequest"]["Key"] for entry in unprocessed if "DeleteRequest" in entry]
                if len(retry) != len(unprocessed):
                    raise ErasureStepError(step, "UnexpectedUnprocessedItem")
                pending = retry + pending
        return len(keys)

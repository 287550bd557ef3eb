"""The service's table writes (the system's write paths) and `save_if_active` (the service
design's dynamo.SaveIfActive, docs/table.md), on a boto3 DynamoDB client.

Every key and item shape comes from the table contract (`schema.table`); the conditions are stated in
`docs/table.md`. The builders are pure and live in `schema.table_writes` (re-exported here), shared
with the local stack's direct writes (`devstack._writes`); `EntitlementTable` makes the calls,
converting botocore errors once (`schema.aws_errors`) and retrying transient ones with bounded backoff.
Refusals are never retried.

Low-level images (`{"S": ...}` attribute values) are kept as DynamoDB returned them: a link puts back
exactly the image it read. An image may hold a processor token: never log one.
"""

from __future__ import annotations

__all__ = [
    "SAVE_IF_ACTIVE_CONDITION",
    "DynamoDBCalls",
    "EntitlementTable",
    "LowLevelItem",
    "TransactionRefusedError",
    "UserItems",
    "attribute",
    "business_time",
    "cancellation_record",
    "cancellation_transaction",
    "entitlement_row",
    "guard_update",
    "lost_race_schedule",
    "reactivation_transaction",
    "retire_transaction",
    "save_if_active_request",
    "second_signup_transaction",
    "signup_transaction",
    "stale_record",
    "ttl_after",
]

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from botocore.exceptions import ClientError

from adapters import RetryPolicy
from schema.aws_errors import RETRYABLE_CANCELLATION_CODES, aws_error_code, cancellation_codes, converted
from schema.errors import RetryableError, TerminalError
from schema.table import (
    CANCELLATION_SK,
    ENTITLEMENT_SK_PREFIX,
    GUARD_SK,
    IDEMPOTENCY_SK_PREFIX,
    STALE_SK_PREFIX,
    EntitlementStatus,
    user_pk,
)
from schema.table_writes import (
    SAVE_IF_ACTIVE_CONDITION,
    LowLevelItem,
    attribute,
    business_time,
    cancellation_record,
    cancellation_transaction,
    entitlement_row,
    guard_update,
    lost_race_schedule,
    low_level,
    reactivation_transaction,
    retire_transaction,
    save_if_active_request,
    second_signup_transaction,
    signup_transaction,
    stale_record,
    ttl_after,
)
from service.errors import EntitlementNotActiveError, UnknownUserError

_STATUS = {"#status": "status"}
AttributeValueLike = Any
_CHECK_FAILED = "ConditionalCheckFailedException"


class TransactionRefusedError(TerminalError):
    """A transaction's condition failed: the table is not in the state the write moves it from.
    `codes`: DynamoDB's per-item cancellation reasons, in the transaction's order."""

    def __init__(self, message: str, codes: list[str]) -> None:
        self.codes = codes
        super().__init__(message)


# -- reading a user's items -------------------------------------------------------------------------


@dataclass(frozen=True)
class UserItems:
    """Every item in one user's partition, as read (strongly consistent)."""

    rows: list[LowLevelItem] = field(default_factory=list)
    cancellation: LowLevelItem | None = None
    stale: list[LowLevelItem] = field(default_factory=list)
    # The user's guard version as read (0: no guard item yet): every write path's transaction requires it.
    guard_version: int = 0
    guard_token: str | None = None  # the guard's lastWrite: which write set that version

    def with_status(self, status: EntitlementStatus) -> list[LowLevelItem]:
        return [row for row in self.rows if attribute(row, "status") == status.value]

    def latest(self, status: EntitlementStatus) -> LowLevelItem | None:
        """The newest row in `status` (by createdAt): the one a user's operation acts on."""
        rows = self.with_status(status)
        return max(rows, key=lambda row: attribute(row, "createdAt") or "") if rows else None

    def accounts(self) -> set[str]:
        return {account for row in self.rows if (account := attribute(row, "arrayAccountId"))}


# -- the calls --------------------------------------------------------------------------------------


class DynamoDBCalls(Protocol):
    """The data-plane calls the service makes (a boto3 `dynamodb` client has them)."""

    def put_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def update_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def query(self, **kwargs: Any) -> dict[str, Any]: ...
    def scan(self, **kwargs: Any) -> dict[str, Any]: ...
    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]: ...


class EntitlementTable:
    """The entitlements table as the service writes it. Thread-safe (boto3 clients are)."""

    def __init__(self, client: DynamoDBCalls, table_name: str, *, retry: RetryPolicy | None = None) -> None:
        self._client = client
        self.table_name = table_name
        self._retry = retry or RetryPolicy()

    def user_items(self, user_id: str) -> UserItems:
        """Every item of the user's partition (paginated, strongly consistent)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": user_pk(user_id)}},
            "ConsistentRead": True,
        }
        items: list[LowLevelItem] = []
        while True:
            page = self._call("DynamoDB Query", self._client.query, request)
            items.extend(page.get("Items", []))
            last = page.get("LastEvaluatedKey")
            if not last:
                break
            request = {**request, "ExclusiveStartKey": last}
        rows, stale, cancellation, version, token = [], [], None, 0, None
        for item in items:
            sk = attribute(item, "sk") or ""
            if sk.startswith(ENTITLEMENT_SK_PREFIX):
                rows.append(item)
            elif sk == CANCELLATION_SK:
                cancellation = item
            elif sk.startswith(STALE_SK_PREFIX):
                stale.append(item)
            elif sk == GUARD_SK:
                version, token = _number(item.get("version")), attribute(item, "lastWrite")
            elif sk.startswith(IDEMPOTENCY_SK_PREFIX):
                continue  # read on their own key (service.idempotency)
        return UserItems(
            rows=rows, cancellation=cancellation, stale=stale, guard_version=version, guard_token=token
        )

    def active_row(self, user_id: str) -> LowLevelItem:
        """The user's Active row, exactly as stored. `UnknownUserError` when the user has no row,
        `EntitlementNotActiveError` when none is Active."""
        items = self.user_items(user_id)
        if not items.rows:
            raise UnknownUserError("the user has no entitlement row")
        row = items.latest(EntitlementStatus.ACTIVE)
        if row is None:
            raise EntitlementNotActiveError("the user has no Active entitlement row")
        return row

    def put_if(self, request: dict[str, Any]) -> bool:
        """A conditional PutItem: False when its condition refused it."""
        try:
            self._call("DynamoDB PutItem", self._client.put_item, request)
        except _CheckFailedError:
            return False
        return True

    def update_if(self, request: dict[str, Any]) -> bool:
        """A conditional UpdateItem: False when its condition refused it."""
        try:
            self._call("DynamoDB UpdateItem", self._client.update_item, request)
        except _CheckFailedError:
            return False
        return True

    def read_item(self, key: dict[str, str]) -> LowLevelItem | None:
        """One item by its key (strongly consistent), or None."""
        request = {"TableName": self.table_name, "Key": low_level(key), "ConsistentRead": True}
        item: LowLevelItem | None = self._call("DynamoDB GetItem", self._client.get_item, request).get("Item")
        return item

    def save_if_active(self, image: LowLevelItem) -> None:
        """dynamo.SaveIfActive: put back exactly `image` if the row still exists and is still Active.
        Raises `EntitlementNotActiveError` (terminal) when the condition refuses the write."""
        try:
            self._call(
                "DynamoDB PutItem", self._client.put_item, save_if_active_request(self.table_name, image)
            )
        except _CheckFailedError:
            raise EntitlementNotActiveError(
                "the entitlement row is no longer Active", reason="save_refused"
            ) from None

    def transact(self, items: list[dict[str, Any]]) -> None:
        """One TransactWriteItems. `TransactionRefusedError` when a condition fails (never retried);
        conflicts and throttling are retried."""
        for attempt in self._retry.retrying():
            with attempt:
                try:
                    self._client.transact_write_items(TransactItems=items)
                except ClientError as error:
                    if aws_error_code(error) == "TransactionCanceledException":
                        codes = cancellation_codes(error)
                        failed = {code for code in codes if code not in ("None", "")}
                        if failed and failed <= {"ConditionalCheckFailed"}:
                            raise TransactionRefusedError("transaction refused", codes) from None
                        if failed & RETRYABLE_CANCELLATION_CODES:
                            raise RetryableError("DynamoDB TransactWriteItems cancelled: conflict") from None
                    with converted("DynamoDB TransactWriteItems"):
                        raise

    def active_user_ids(self) -> Iterator[str]:
        """Every user holding an Active row (a scan: the relinker's `--all-active`)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "FilterExpression": "begins_with(sk, :prefix) AND #status = :active",
            "ExpressionAttributeNames": dict(_STATUS),
            "ExpressionAttributeValues": {
                ":prefix": {"S": ENTITLEMENT_SK_PREFIX},
                ":active": {"S": EntitlementStatus.ACTIVE.value},
            },
            "ProjectionExpression": "userId",
        }
        seen: set[str] = set()
        while True:
            page = self._call("DynamoDB Scan", self._client.scan, request)
            for item in page.get("Items", []):
                user_id = attribute(item, "userId")
                if user_id and user_id not in seen:
                    seen.add(user_id)
                    yield user_id
            last = page.get("LastEvaluatedKey")
            if not last:
                return
            request = {**request, "ExclusiveStartKey": last}

    def _call(self, operation: str, call: Any, request: dict[str, Any]) -> dict[str, Any]:
        for attempt in self._retry.retrying():
            with attempt:
                try:
                    result: dict[str, Any] = call(**request)
                    return result
                except ClientError as error:
                    if aws_error_code(error) == _CHECK_FAILED:
                        raise _CheckFailedError from None
                    with converted(operation):
                        raise
        raise AssertionError("unreachable")  # pragma: no cover


def _number(value: AttributeValueLike) -> int:
    """The guard's version: a Number the service wrote. Anything else is a guard nobody can match, so
    every guarded write refuses until it is repaired (never silently treated as absent)."""
    if isinstance(value, dict) and isinstance(value.get("N"), str):
        try:
            return int(value["N"])
        except ValueError:
            pass
    return -1


class _CheckFailedError(TerminalError):
    def __init__(self) -> None:
        super().__init__("condition failed")

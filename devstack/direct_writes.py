"""The local stack's direct table writes, named as such: the writes of the anomalies the service cannot
make (`devstack.planted_faults`) and of the table-only simulation (`entitlements simulate` without
`--clients`). The service's own writes are `service.dynamo`'s; these are boto3 calls of the requests
`devstack._writes` builds from `schema.table_writes`, retried on transient failures (throttling, 5xx,
connection errors) and never on a refusal.
"""

from __future__ import annotations

__all__ = ["DirectWriteRefused", "DirectWrites", "DynamoDBWriteClient", "NotActiveRefused"]

import time
from collections.abc import Callable
from typing import Any, Protocol

from botocore.exceptions import ClientError
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from devstack import _writes as writes
from schema.aws_errors import RETRYABLE_CANCELLATION_CODES, aws_error_code, cancellation_codes, converted
from schema.errors import RetryableError, TerminalError


class NotActiveRefused(TerminalError):
    """SaveIfActive's condition refused a direct put-back (the row is gone or not Active): terminal,
    counted, never retried."""


class DirectWriteRefused(TerminalError):
    """A direct write's condition was not met (the table is not in the state the write moves it from)."""

    def __init__(self, message: str, codes: list[str]) -> None:
        super().__init__(message)
        self.codes = codes


class DynamoDBWriteClient(Protocol):
    """The data-plane calls the simulator makes (a boto3 `dynamodb` client has them)."""

    def get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def put_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def update_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]: ...


class DirectWrites:
    """Direct writes to the entitlements table (never the service's path). Transient failures
    (throttling, 5xx, connection errors) are retried with backoff; refusals never are."""

    def __init__(
        self,
        client: DynamoDBWriteClient,
        table_name: str,
        *,
        attempts: int = 4,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self.table_name = table_name
        self._attempts = attempts
        self._sleep = sleep
        self.writes = 0

    def _retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type(RetryableError),
            stop=stop_after_attempt(self._attempts),
            wait=wait_exponential(multiplier=0.05, max=2.0),
            sleep=self._sleep,
            reraise=True,
        )

    def get_row(self, user_id: str, array_account_id: str) -> writes.LowLevelItem | None:
        """The row's full low-level image (strongly consistent), or None."""
        request = writes.get_row(self.table_name, user_id, array_account_id)
        for attempt in self._retrying():
            with attempt, converted("DynamoDB GetItem"):
                item: writes.LowLevelItem | None = self._client.get_item(**request).get("Item")
                return item
        raise AssertionError("unreachable")  # pragma: no cover

    def put(self, item: writes.LowLevelItem) -> None:
        """An unconditional whole-item put (signup; or the stale write of a planted race)."""
        request = writes.unconditional_put(self.table_name, item)
        for attempt in self._retrying():
            with attempt, converted("DynamoDB PutItem"):
                self._client.put_item(**request)
        self.writes += 1

    def save_if_active(self, image: writes.LowLevelItem) -> None:
        """dynamo.SaveIfActive: put back exactly `image` only if the row exists and is Active.
        Raises NotActiveRefused (terminal) when refused."""
        request = writes.save_if_active(self.table_name, image)
        for attempt in self._retrying():
            with attempt:
                try:
                    self._client.put_item(**request)
                except ClientError as error:
                    if aws_error_code(error) == "ConditionalCheckFailedException":
                        raise NotActiveRefused("entitlement row is not active") from None
                    with converted("DynamoDB PutItem"):
                        raise
        self.writes += 1

    def update(self, request: dict[str, Any]) -> None:
        for attempt in self._retrying():
            with attempt:
                try:
                    self._client.update_item(**request)
                except ClientError as error:
                    if aws_error_code(error) == "ConditionalCheckFailedException":
                        raise DirectWriteRefused("update refused", ["ConditionalCheckFailed"]) from None
                    with converted("DynamoDB UpdateItem"):
                        raise
        self.writes += 1

    def transact(self, items: list[dict[str, Any]]) -> None:
        """One TransactWriteItems. Raises DirectWriteRefused when a condition fails."""
        for attempt in self._retrying():
            with attempt:
                try:
                    self._client.transact_write_items(TransactItems=items)
                except ClientError as error:
                    codes = cancellation_codes(error)
                    failed = {c for c in codes if c not in ("None", "")}
                    if aws_error_code(error) == "TransactionCanceledException":
                        if failed <= {"ConditionalCheckFailed"}:
                            raise DirectWriteRefused("transaction refused", codes) from None
                        if failed & RETRYABLE_CANCELLATION_CODES:
                            raise RetryableError("DynamoDB TransactWriteItems cancelled: conflict") from None
                    with converted("DynamoDB TransactWriteItems"):
                        raise
        self.writes += 1

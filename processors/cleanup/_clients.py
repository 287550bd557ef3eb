"""The slices of the boto3 clients the cleanup processor calls, typed as Protocols so that tests and
benches can pass fakes. A boto3 `dynamodb` / `sqs` client satisfies them.

Build the real clients with `flush_call_bounds(retry_budget_seconds)` as their botocore `Config`: each
call, its one retry included, then ends inside the flush's budget on its own. The handler does not rely on
it (it stops waiting at its deadline whatever a call is doing), but a call that ends frees its thread."""

from __future__ import annotations

__all__ = ["DynamoDBClient", "SqsClient", "flush_call_bounds"]

from typing import Any, Protocol

# botocore's own bounds per call, whatever the budget: a connection is made in 2 s or not at all, and a
# DynamoDB or SQS answer that takes more than 5 s is a failure worth parking for.
_MAX_CONNECT_SECONDS = 2.0
_MAX_READ_SECONDS = 5.0
_CALL_ATTEMPTS = 2  # the call and one retry (botocore's standard mode: throttling, 5xx, connection faults)


def flush_call_bounds(retry_budget_seconds: float) -> dict[str, Any]:
    """botocore `Config` arguments for the DynamoDB and SQS clients of a cleanup flush whose budget is
    `retry_budget_seconds` (`config.ArraySettings.retry_budget_seconds`): connect and read timeouts, and
    bounded retries, such that a call with its retry takes at most three quarters of the budget."""
    if retry_budget_seconds <= 0:
        raise ValueError("the retry budget must be positive")
    share = retry_budget_seconds * 0.75 / _CALL_ATTEMPTS  # one attempt: connect + read
    connect = min(_MAX_CONNECT_SECONDS, share / 3)
    read = min(_MAX_READ_SECONDS, share - connect)
    return {
        "connect_timeout": connect,
        "read_timeout": read,
        "retries": {"mode": "standard", "total_max_attempts": _CALL_ATTEMPTS},
    }


class DynamoDBClient(Protocol):
    def query(self, **kwargs: Any) -> Any: ...

    def get_item(self, **kwargs: Any) -> Any: ...

    def update_item(self, **kwargs: Any) -> Any: ...


class SqsClient(Protocol):
    def send_message(self, **kwargs: Any) -> Any: ...

    def send_message_batch(self, **kwargs: Any) -> Any: ...

    def receive_message(self, **kwargs: Any) -> Any: ...

    def delete_message(self, **kwargs: Any) -> Any: ...

    def delete_message_batch(self, **kwargs: Any) -> Any: ...

    def get_queue_attributes(self, **kwargs: Any) -> Any: ...

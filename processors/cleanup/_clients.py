"""The slices of the boto3 clients the cleanup processor calls, typed as Protocols so that tests and
benches can pass fakes. A boto3 `dynamodb` / `sqs` client satisfies them. Configure real clients with
connect and read timeouts (botocore `Config`): the handler's time budget assumes every call returns."""

from __future__ import annotations

__all__ = ["DynamoDBClient", "SqsClient"]

from typing import Any, Protocol


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

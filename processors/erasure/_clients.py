"""The slices of the boto3 clients the erasure subscriber calls, typed as Protocols so that tests and
benches can pass fakes (a boto3 client of the named service satisfies each). Give real clients connect
and read timeouts (botocore `Config`) no longer than the batch timeout: a call that outlives its budget
is abandoned, not stopped."""

from __future__ import annotations

__all__ = [
    "CloudWatchClient",
    "DynamoDBTableClient",
    "ErasureSqsClient",
    "SnsSetupClient",
    "SqsSetupClient",
]

from typing import Any, Protocol


class ErasureSqsClient(Protocol):
    """What the worker does with SQS: poll its queue, re-enqueue pass two, delete, answer."""

    def receive_message(self, **kwargs: Any) -> Any: ...

    def delete_message_batch(self, **kwargs: Any) -> Any: ...

    def send_message(self, **kwargs: Any) -> Any: ...

    def send_message_batch(self, **kwargs: Any) -> Any: ...

    def get_queue_attributes(self, **kwargs: Any) -> Any: ...

    def get_queue_url(self, **kwargs: Any) -> Any: ...


class SqsSetupClient(Protocol):
    def create_queue(self, **kwargs: Any) -> Any: ...

    def get_queue_attributes(self, **kwargs: Any) -> Any: ...

    def set_queue_attributes(self, **kwargs: Any) -> Any: ...


class SnsSetupClient(Protocol):
    def create_topic(self, **kwargs: Any) -> Any: ...

    def subscribe(self, **kwargs: Any) -> Any: ...

    def get_subscription_attributes(self, **kwargs: Any) -> Any: ...

    def set_subscription_attributes(self, **kwargs: Any) -> Any: ...


class CloudWatchClient(Protocol):
    def put_metric_data(self, **kwargs: Any) -> Any: ...


class DynamoDBTableClient(Protocol):
    def query(self, **kwargs: Any) -> Any: ...

    def batch_write_item(self, **kwargs: Any) -> Any: ...

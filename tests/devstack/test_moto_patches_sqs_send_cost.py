"""An SQS send on the local stack costs what it sends (devstack._moto_patches.install_sqs_send_cost): moto's
send path no longer counts the queue's messages for every message sent, and everything a send and a
read of the attributes answer stays as moto answers it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest


def test_a_send_message_batch_into_a_deep_queue_reads_none_of_its_message_counts(
    sqs: Any, counted: list[str]
) -> None:
    url = sqs.create_queue(QueueName=f"send-cost-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    for _ in range(5):
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)]
        )
    sqs.send_message(QueueUrl=url, MessageBody="one more")
    assert counted == []


def test_the_queue_attributes_still_count_every_message_sent(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=f"send-cost-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "0", "MessageBody": "now"},
            {"Id": "1", "MessageBody": "later", "DelaySeconds": 600},
        ],
    )
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "1"
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_a_fifo_queue_with_content_based_deduplication_still_takes_a_repeated_body_once(sqs: Any) -> None:
    url = sqs.create_queue(
        QueueName=f"send-cost-{uuid.uuid4().hex[:12]}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    for _ in range(2):
        sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [message["Body"] for message in received] == ["same"]


def test_a_fifo_queue_without_content_based_deduplication_still_asks_for_a_deduplication_id(
    sqs: Any,
) -> None:
    url = sqs.create_queue(
        QueueName=f"send-cost-{uuid.uuid4().hex[:12]}.fifo", Attributes={"FifoQueue": "true"}
    )["QueueUrl"]
    with pytest.raises(sqs.exceptions.ClientError):
        sqs.send_message(QueueUrl=url, MessageBody="body", MessageGroupId="g")

"""An SQS receive on the local stack costs what it returns (devstack._moto_patches.install_sqs_receive_cost):
moto's receive no longer counts the queue's messages for every message it returns, and a message past
the queue's retention period is still never returned."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import devstack._moto_patches as patches


def _queue_of(sqs: Any, count: int, **attributes: str) -> str:
    url: str = sqs.create_queue(QueueName=f"receive-cost-{uuid.uuid4().hex[:12]}", Attributes=attributes)[
        "QueueUrl"
    ]
    for start in range(0, count, 10):
        entries = [{"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(min(10, count - start))]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    return url


def test_a_receive_of_ten_from_a_deep_queue_reads_none_of_its_message_counts(
    sqs: Any, counted: list[str]
) -> None:
    url = _queue_of(sqs, 50)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert (len(received), counted) == (10, [])


def test_a_message_past_the_retention_period_is_never_received(
    sqs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _queue_of(sqs, 1, MessageRetentionPeriod="60")
    later = patches.unix_time() + 61
    monkeypatch.setattr(patches, "unix_time", lambda: later)
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []


def test_a_message_within_the_retention_period_is_received(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _queue_of(sqs, 1, MessageRetentionPeriod="60")
    later = patches.unix_time() + 50
    monkeypatch.setattr(patches, "unix_time", lambda: later)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [message["Body"] for message in received] == ["m0"]

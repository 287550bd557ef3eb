"""Fixtures for the erasure contract's tests: SQS on the session's moto server (loopback only)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest


@pytest.fixture
def sqs_client(moto_endpoint: str) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=moto_endpoint,
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def queue_url(sqs_client: Any) -> Iterator[str]:
    url: str = sqs_client.create_queue(QueueName=f"erasure-responses-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    yield url
    sqs_client.delete_queue(QueueUrl=url)

"""devstack/moto_process.py: the project's moto server in a process of its own, on loopback, that a test
can freeze (a hung dependency) and thaw."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError

from devstack.moto_process import moto_process


def sqs(endpoint: str) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(connect_timeout=2, read_timeout=2, retries={"max_attempts": 0}),
    )


def test_a_frozen_moto_answers_nothing_until_it_is_thawed() -> None:
    with moto_process() as moto:
        assert moto.endpoint.startswith("http://127.0.0.1:")
        client = sqs(moto.endpoint)
        client.create_queue(QueueName="q")
        moto.freeze()
        with pytest.raises(ReadTimeoutError):
            client.list_queues()
        moto.thaw()
        assert client.list_queues()["QueueUrls"] == [f"{moto.endpoint}/123456789012/q"]

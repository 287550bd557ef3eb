"""Fixtures for the devstack tests: a fresh table per test (the moto clients are tests/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.sqs.models import Queue

from pipeline.tables import TableDescription, create_table
from tests.support.dynamodb import unique_table_name


@pytest.fixture
def table(dynamodb: Any) -> Iterator[TableDescription]:
    yield create_table(dynamodb, unique_table_name("dev"))


_QUEUE_COUNTS = (
    "approximate_number_of_messages",
    "approximate_number_of_messages_delayed",
    "approximate_number_of_messages_not_visible",
)


@pytest.fixture
def sqs(moto_endpoint: str) -> Any:
    return boto3.client("sqs", endpoint_url=moto_endpoint, region_name="eu-west-1")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every read of a queue's message counts (moto's Queue properties), by name, while the test runs."""
    reads: list[str] = []
    for name in _QUEUE_COUNTS:
        original = Queue.__dict__[name]

        def read(queue: Queue, _name: str = name, _original: Any = original) -> int:
            reads.append(_name)
            return int(_original.fget(queue))

        monkeypatch.setattr(Queue, name, property(read))
    yield reads

"""Fixtures for the devstack tests: clients on the session moto server and a fresh table per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.tables import TableDescription, create_table
from tests.support.dynamodb import client, unique_table_name


@pytest.fixture(scope="session")
def dynamodb(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "dynamodb")


@pytest.fixture(scope="session")
def streams(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "dynamodbstreams")


@pytest.fixture
def table(dynamodb: Any) -> Iterator[TableDescription]:
    yield create_table(dynamodb, unique_table_name("dev"))

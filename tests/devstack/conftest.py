"""Fixtures for the devstack tests: a fresh table per test (the moto clients are tests/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.tables import TableDescription, create_table
from tests.support.dynamodb import unique_table_name


@pytest.fixture
def table(dynamodb: Any) -> Iterator[TableDescription]:
    yield create_table(dynamodb, unique_table_name("dev"))

"""The service's local world for tests: the fake Array and transactions-service (one set of hooks) and
settings that point the service at them, at a moto endpoint and at a table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config import Settings, load_settings
from devstack._fake_http import Hooks
from devstack.fake_array import FakeArrayServer
from devstack.fake_transactions import FakeTransactionsServer


@dataclass
class World:
    array: FakeArrayServer
    transactions: FakeTransactionsServer
    hooks: Hooks
    settings: Settings


def world_settings(
    *, endpoint: str, table_name: str, array_url: str, transactions_url: str, state_dir: Path, **more: Any
) -> Settings:
    return load_settings(
        aws={
            "endpoint_url": endpoint,
            "region": "eu-west-1",
            "access_key_id": "testing",
            "secret_access_key": "testing",
        },
        consumer={"table_name": table_name, "state_dir": state_dir, **more.pop("consumer", {})},
        lake={"root": str(state_dir / "lake"), "flush_seconds": 1.0},
        array={"base_url": array_url, "max_attempts": 2, "timeout_seconds": 5.0},
        service={
            "transactions_base_url": transactions_url,
            "max_attempts": 2,
            "backoff_base_seconds": 0.01,
            "outcome_flush_seconds": 0.5,
        },
        **more,
    )


@contextmanager
def local_world(*, endpoint: str, table_name: str, state_dir: Path, **more: Any) -> Iterator[World]:
    hooks = Hooks(max_hold_seconds=30.0)
    with (
        FakeArrayServer(hooks=hooks, every_account_exists=False) as array,
        FakeTransactionsServer(hooks=hooks) as transactions,
    ):
        settings = world_settings(
            endpoint=endpoint,
            table_name=table_name,
            array_url=array.url,
            transactions_url=transactions.url,
            state_dir=state_dir,
            **more,
        )
        yield World(array, transactions, hooks, settings)

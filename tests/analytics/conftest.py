"""Fixtures for the lake tests: a fresh local lake and a simulated table."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.lake import Lake, open_lake
from tests.analytics.lakesim import TableSim


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return open_lake(str(tmp_path / "lake"))


@pytest.fixture
def history() -> TableSim:
    """Two shards, 30 users, a few hundred changes across several days (so several partitions)."""
    sim = TableSim(shards=("shardId-00000001-aaaa", "shardId-00000002-bbbb"), seed=7)
    sim.random_history(users=30, operations=400)
    return sim

"""Every bench module `make bench` runs imports cleanly: a rename elsewhere in the tree cannot break the
bench run unseen (its modules are imported one after another, so one broken import stops the rest)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import bench

MODULES = sorted(info.name for info in pkgutil.iter_modules([str(Path(bench.__file__).parent)]))


@pytest.mark.parametrize("name", MODULES)
def test_the_bench_module_imports(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    assert not name.startswith("bench_") or callable(getattr(module, "main", None))

"""Every bench module `make bench` runs imports cleanly: a rename elsewhere in the tree cannot break the
bench run unseen; and a module that fails is reported and ends the run non-zero without stopping the rest."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import bench
from bench.__main__ import run_modules

MODULES = sorted(info.name for info in pkgutil.iter_modules([str(Path(bench.__file__).parent)]))


@pytest.mark.parametrize("name", MODULES)
def test_the_bench_module_imports(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    assert not name.startswith("bench_") or callable(getattr(module, "main", None))


def _fails() -> None:
    raise SystemExit("bench_x: a cleanup did not finish")


def _raises() -> None:
    raise RuntimeError("Invalid table version: 2")


def test_a_failing_module_does_not_stop_the_next_and_the_run_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ran: list[str] = []
    status = run_modules([("first", _fails), ("second", _raises), ("third", lambda: ran.append("third"))])
    assert status == 1 and ran == ["third"]
    assert "bench: failed: first, second" in capsys.readouterr().err


def test_modules_that_all_return_end_the_run_with_status_0() -> None:
    assert run_modules([("one", lambda: None), ("two", lambda: None)]) == 0

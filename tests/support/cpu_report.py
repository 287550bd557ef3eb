"""Where a test run's time goes, by test file: the CPU of the pytest process and of every process its tests
started and waited for (a daemon's JVM and its Python children, moto in a process, a CLI run), and the wall
time, summed over each file's tests (set-up and teardown included, so a module fixture counts where it
runs). The run's costliest files end its report: on CI's two cores the suite is CPU-bound, so CPU, not wall
time, says which set-up to cut. The teardown after the last test (of the run, or of each xdist worker) ends
the session fixtures too: a moto process serving every S3 lake test is waited for there, and its minutes of
CPU would land on whichever file happened to run last, so that teardown is a row of its own
(`SESSION_TEARDOWN`). Under pytest-xdist each worker sends its figures to the controller, which prints them
once."""

from __future__ import annotations

__all__ = ["CpuReport"]

import resource
import time
from collections.abc import Generator
from typing import Any

import pytest

_KEY = "cpu_report_by_file"
_SHOWN = 15
SESSION_TEARDOWN = "(teardown after the last test: the session fixtures)"


def _cpu_seconds() -> float:
    """User and system CPU of this process and of its waited-for descendants so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CpuReport:
    """A pytest plugin: per test file, [CPU seconds, wall seconds, tests]."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._by_file: dict[str, list[float]] = {}
        self._last_teardown: tuple[float, float] | None = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, Any, None]:
        cpu, wall = _cpu_seconds(), time.monotonic()
        yield
        figures = self._by_file.setdefault(item.location[0], [0.0, 0.0, 0.0])
        figures[0] += _cpu_seconds() - cpu
        figures[1] += time.monotonic() - wall
        figures[2] += 1
        if self._last_teardown is not None:  # moved from the last test's file to a row of its own
            teardown_cpu, teardown_wall = self._last_teardown
            self._last_teardown = None
            figures[0] -= teardown_cpu
            figures[1] -= teardown_wall
            session = self._by_file.setdefault(SESSION_TEARDOWN, [0.0, 0.0, 0.0])
            session[0] += teardown_cpu
            session[1] += teardown_wall

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, None]:
        cpu, wall = _cpu_seconds(), time.monotonic()
        yield
        if nextitem is None:  # every scope is torn down here, the session's included
            self._last_teardown = (_cpu_seconds() - cpu, time.monotonic() - wall)

    def pytest_sessionfinish(self) -> None:
        output = getattr(self._config, "workeroutput", None)
        if output is not None:  # a pytest-xdist worker: the controller reports
            output[_KEY] = self._by_file

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        for path, (cpu, wall, tests) in getattr(node, "workeroutput", {}).get(_KEY, {}).items():
            figures = self._by_file.setdefault(path, [0.0, 0.0, 0.0])
            figures[0] += cpu
            figures[1] += wall
            figures[2] += tests

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self._config, "workeroutput") or not self._by_file:
            return
        ranked = sorted(self._by_file.items(), key=lambda entry: -entry[1][0])
        total_cpu = sum(cpu for cpu, _, _ in self._by_file.values())
        terminalreporter.write_sep(
            "=", f"CPU by test file: {total_cpu:.0f} s in all, the {min(_SHOWN, len(ranked))} costliest"
        )
        terminalreporter.write_line(f"{'CPU s':>8} {'wall s':>8} {'tests':>6}  file")
        for path, (cpu, wall, tests) in ranked[:_SHOWN]:
            terminalreporter.write_line(f"{cpu:8.1f} {wall:8.1f} {tests:6.0f}  {path}")

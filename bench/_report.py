"""How every benchmark reports: a figure beside its baseline, measured in the same run, as a ratio; and
how a bench runs threads so that one failing ends the bench with a non-zero exit (`BenchThreads`)
instead of a run that prints every target met."""

from __future__ import annotations

__all__ = ["BenchThreads", "Comparison", "best_of", "burners", "print_figures"]

import contextlib
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Comparison:
    """One printed line of a bench: a measured figure beside its baseline, measured in the same run,
    and its target."""

    name: str
    value: float
    unit: str
    baseline_name: str
    baseline_value: float
    # "higher" when a bigger value is better (throughput), "lower" for costs (seconds, bytes).
    better: str = "higher"
    target: str = ""  # the target in words, e.g. "ratio >= 2.5"
    met: bool | None = None

    @property
    def ratio(self) -> float:
        return self.value / self.baseline_value if self.baseline_value else float("inf")


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    """The fastest of several timed runs, in seconds: the least disturbed by a noisy machine."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def _number(value: float) -> str:
    """Three significant digits or more: 0.613, 12.4, 121,476."""
    if abs(value) < 10:
        return f"{value:,.3f}"
    if abs(value) < 1000:
        return f"{value:,.1f}"
    return f"{value:,.0f}"


def print_figures(title: str, figures: list[Comparison]) -> None:
    # The load beside every figure: timings on a shared machine mean little without it.
    one, five, fifteen = os.getloadavg()
    print(f"\n== {title}  (load average {one:.1f} {five:.1f} {fifteen:.1f})")
    for f in figures:
        verdict = "" if f.met is None else ("  [target met]" if f.met else "  [TARGET MISSED]")
        print(
            f"  {f.name}: {_number(f.value)} {f.unit}  |  baseline {f.baseline_name}: "
            f"{_number(f.baseline_value)} {f.unit}  |  ratio {f.ratio:.2f}x"
            # A figure printed without a target says so, so that a missing target is not mistaken for a
            # met one; its name or title says why it has none.
            + (f"  (target {f.target})" if f.target else "  (no target)")
            + verdict
        )


@contextlib.contextmanager
def burners(count: int | None = None) -> Iterator[int]:
    """`count` busy-looping processes (default one per core) for the block: a figure measured "beside
    a burner" meets a machine whose cores are taken by other work. Yields how many run."""
    wanted = count if count is not None else os.cpu_count() or 1
    running = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(wanted)]
    try:
        yield wanted
    finally:
        for burner in running:
            burner.kill()
            burner.wait()


class BenchThreads:
    """A bench's background threads (daemons). A thread that raises is recorded, with its name;
    `check()` (call it while waiting on them, and before reporting) prints one line per failed thread,
    its traceback, and ends the bench with exit status 1."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: list[tuple[str, BaseException]] = []

    def start(self, name: str, target: Callable[..., object], *args: Any, **kwargs: Any) -> threading.Thread:
        def run() -> None:
            try:
                target(*args, **kwargs)
            except BaseException as error:  # a bench thread's failure must fail the bench
                with self._lock:
                    self._failed.append((name, error))

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        return thread

    def join(self, thread: threading.Thread, timeout: float) -> bool:
        """Wait for `thread` to end; one still running after `timeout` seconds counts as failed (what
        it holds must not be closed under it). Returns whether it ended."""
        thread.join(timeout)
        if thread.is_alive():
            with self._lock:
                self._failed.append((thread.name, TimeoutError(f"still running after {timeout:g} s")))
            return False
        return True

    @property
    def failed(self) -> list[str]:
        with self._lock:
            return [name for name, _ in self._failed]

    def check(self) -> None:
        with self._lock:
            failed = list(self._failed)
        if not failed:
            return
        for name, error in failed:
            print(f"bench thread {name!r} failed: {type(error).__name__}", file=sys.stderr)
            if error.__traceback__ is not None:
                traceback.print_exception(error, file=sys.stderr)
        raise SystemExit(1)

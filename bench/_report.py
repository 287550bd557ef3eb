"""How every benchmark reports: a figure beside its baseline, measured in the same run, as a ratio."""

from __future__ import annotations

__all__ = ["Figure", "best_of", "print_figures"]

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
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


def print_figures(title: str, figures: list[Figure]) -> None:
    print(f"\n== {title}")
    for f in figures:
        verdict = "" if f.met is None else ("  [target met]" if f.met else "  [TARGET MISSED]")
        print(
            f"  {f.name}: {_number(f.value)} {f.unit}  |  baseline {f.baseline_name}: "
            f"{_number(f.baseline_value)} {f.unit}  |  ratio {f.ratio:.2f}x"
            + (f"  (target {f.target})" if f.target else "")
            + verdict
        )

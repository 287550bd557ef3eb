"""Progress bars for a command's long steps (snapshot, compaction, repair, simulation, replay), on stderr.

    with progress("repairing rows", total=len(candidates)) as bar:
        for candidate in candidates:
            ...
            bar.advance()

    with progress("replaying parked batches") as bar:
        recovery.replay_parked(progress=bar.at)  # a library's (done, total) callback

    for batch in track(batches, "replaying parked batches", total=count):
        ...

A bar is drawn only when stderr is a terminal and `entitlements --quiet` was not given: piped output,
CI logs and tests see nothing, and stdout (a command's result) is never touched. A bar's text is the
step's description and counts, never a record's content. rich is imported only when a bar is drawn.
"""

from __future__ import annotations

__all__ = ["ProgressStep", "is_quiet", "progress", "set_quiet", "track"]

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

_T = TypeVar("_T")

_quiet = False


def set_quiet(quiet: bool) -> None:
    """`entitlements --quiet`: no bars for the rest of this invocation."""
    global _quiet  # noqa: PLW0603 (one process-wide switch, set by the CLI's root option)
    _quiet = quiet


def is_quiet() -> bool:
    """Whether bars are off: `--quiet`, or stderr is not a terminal."""
    isatty = getattr(sys.stderr, "isatty", None)
    return _quiet or not (callable(isatty) and isatty())


class ProgressStep:
    """One step's bar. Every method is a no-op when bars are off."""

    def __init__(self, bar: Any = None, task: Any = None) -> None:
        self._bar = bar
        self._task = task
        self.done = 0

    def advance(self, amount: int = 1) -> None:
        self.done += amount
        if self._bar is not None:
            self._bar.advance(self._task, amount)

    def at(self, done: int, total: int | None) -> None:
        """Where the step is, as a library's `progress(done, total)` callback reports it."""
        self.done = done
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total)

    def set_total(self, total: int | None) -> None:
        """The step's size once known (None: unknown, the bar pulses)."""
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def describe(self, description: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=description)


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator[ProgressStep]:
    """A bar for one step, removed when the step ends (the command's own summary line stays)."""
    if is_quiet():
        yield ProgressStep()
        return
    from rich.console import Console  # noqa: PLC0415 (only when a bar is drawn)
    from rich.progress import (  # noqa: PLC0415
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with bar:
        yield ProgressStep(bar, bar.add_task(description, total=total))


def track(items: Iterable[_T], description: str, total: int | None = None) -> Iterator[_T]:
    """`items`, advancing a bar by one per item (`total` defaults to `len(items)` when it has one)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress(description, total=total) as step:
        for item in items:
            yield item
            step.advance()

"""Progress bars for a command's long steps (snapshot, compaction, repair, simulation, replay), on stderr.

    with progress("repairing rows", total=len(candidates)) as bar:
        for candidate in candidates:
            ...
            bar.advance()

    with progress("replaying parked batches") as bar:
        recovery.replay_parked(progress=bar.at)  # a library's (done, total) callback

    for batch in track(batches, "replaying parked batches", total=count):
        ...

A bar is drawn only when stderr is a terminal and `entitlements --quiet` was not given, and stdout (a
command's result) is never touched. Elsewhere (piped output, CI logs) a step given `every=SECONDS` writes
one line to stderr each time that long has passed while it runs, from twice that on (`mining
cleanup_latency: 10 s`, with its counts when known), so that a long step is never minutes of silence; a
step shorter than that writes nothing, and other steps nothing at all. A bar's or line's text is the
step's description and counts, never a record's content. rich is imported only when a bar is drawn.
"""

from __future__ import annotations

__all__ = ["LINE_SECONDS", "ProgressStep", "is_quiet", "progress", "set_quiet", "track"]

import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

_T = TypeVar("_T")

_quiet = False

# How often a long step away from a terminal says it is still running ("every few seconds"), from
# twice that on: a step that ends sooner (most, and every refusal) writes nothing but its own lines.
LINE_SECONDS = 5.0


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

    def __init__(self, bar: Any = None, task: Any = None, description: str = "") -> None:
        self._bar = bar
        self._task = task
        self.done = 0
        self.total: int | None = None
        self.description = description

    def advance(self, amount: int = 1) -> None:
        self.done += amount
        if self._bar is not None:
            self._bar.advance(self._task, amount)

    def at(self, done: int, total: int | None) -> None:
        """Where the step is, as a library's `progress(done, total)` callback reports it."""
        self.done, self.total = done, total
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total)

    def set_total(self, total: int | None) -> None:
        """The step's size once known (None: unknown, the bar pulses)."""
        self.total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def describe(self, description: str) -> None:
        self.description = description
        if self._bar is not None:
            self._bar.update(self._task, description=description)


def _line(step: ProgressStep, elapsed: float) -> str:
    counts = f" {step.done}/{step.total}" if step.total else f" {step.done}" if step.done else ""
    return f"{step.description}:{counts} {elapsed:.0f} s"


@contextmanager
def _lines(step: ProgressStep, every: float) -> Iterator[ProgressStep]:
    """A line on stderr each `every` seconds until the step ends (a daemon thread: it never holds the
    process open; a write to a closed stderr stops it)."""
    ended = threading.Event()
    started = time.monotonic()

    def tell() -> None:
        if ended.wait(every):  # the first line after two intervals
            return
        while not ended.wait(every):
            try:
                sys.stderr.write(_line(step, time.monotonic() - started) + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):  # stderr closed under us: nothing left to tell
                return

    teller = threading.Thread(target=tell, name="progress-lines", daemon=True)
    teller.start()
    try:
        yield step
    finally:
        ended.set()
        teller.join()


@contextmanager
def progress(
    description: str, total: int | None = None, *, every: float | None = None
) -> Iterator[ProgressStep]:
    """A bar for one step, removed when the step ends (the command's own summary line stays); away
    from a terminal, with `every`, a line each `every` seconds while it runs."""
    if is_quiet():
        step = ProgressStep(description=description)
        step.total = total
        if every is None or _quiet:
            yield step
            return
        with _lines(step, every):
            yield step
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
        step = ProgressStep(bar, bar.add_task(description, total=total), description)
        step.total = total
        yield step


def track(items: Iterable[_T], description: str, total: int | None = None) -> Iterator[_T]:
    """`items`, advancing a bar by one per item (`total` defaults to `len(items)` when it has one)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress(description, total=total) as step:
        for item in items:
            yield item
            step.advance()

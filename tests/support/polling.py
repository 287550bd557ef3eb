"""Waiting in tests for what another process does (the daemon, its child, a worker): poll, never time."""

from __future__ import annotations

__all__ = ["wait_for"]

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.5,
    describe: Callable[[], str] | None = None,
) -> T:
    """Call `probe` every `interval` seconds until it gives a truthy value, and return that value;
    raise AssertionError if none came within `timeout` seconds (the outcome is what tests assert),
    saying what `describe` reads of the state then: a CI log then shows how far it got."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(interval)
    state = ""
    if describe is not None:
        try:
            state = f": {describe()}"
        except Exception as failed:  # the timeout is the finding; a broken description must not hide it
            state = f" (its description failed: {type(failed).__name__})"
    raise AssertionError(f"condition not reached in {timeout:g} s{state}")

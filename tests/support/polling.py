"""Waiting in tests for what another process does (the daemon, its child, a worker): poll, never time."""

from __future__ import annotations

__all__ = ["wait_for"]

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], *, timeout: float, interval: float = 0.5) -> T:
    """Call `probe` every `interval` seconds until it gives a truthy value, and return that value;
    raise AssertionError if none came within `timeout` seconds (the outcome is what tests assert)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not reached in time")

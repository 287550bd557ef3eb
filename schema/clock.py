"""Clocks. One simulated clock is shared by the simulator, the TTL emulator, the service and the
processors; it lives in the kernel so that each of them imports it without reaching into another.

Simulated time is `start + (real_now - anchor) * speed`: 63 days pass in seconds, and every process
that is given the same settings agrees on the time without talking to the others.
"""

from __future__ import annotations

__all__ = ["Clock", "ClockSpec", "SimulatedClock", "SystemClock", "clock_from_settings"]

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """An aware UTC datetime."""
        ...


class ClockSpec(Protocol):
    """What a clock is built from (`config.ClockSettings` has it; the kernel does not import config)."""

    @property
    def start(self) -> datetime | None: ...

    @property
    def anchor(self) -> datetime | None: ...

    @property
    def speed(self) -> float: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class SimulatedClock:
    def __init__(self, start: datetime, anchor: datetime, speed: float) -> None:
        if start.tzinfo is None or anchor.tzinfo is None:
            raise ValueError("simulated clock times must be timezone-aware")
        self._start = start
        self._anchor_epoch = anchor.timestamp()
        self._speed = speed

    def now(self) -> datetime:
        elapsed = (time.time() - self._anchor_epoch) * self._speed
        return self._start + timedelta(seconds=elapsed)

    def real_seconds_for(self, simulated: timedelta) -> float:
        """How long, in real seconds, a simulated span takes."""
        return simulated.total_seconds() / self._speed


def clock_from_settings(settings: ClockSpec) -> Clock:
    if settings.start is None:
        return SystemClock()
    anchor = settings.anchor or settings.start
    return SimulatedClock(settings.start, anchor, settings.speed)

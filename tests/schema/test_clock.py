"""schema/clock.py: the one clock the service, devstack, the pipeline and the processors share."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from config import ClockSettings
from schema.clock import SimulatedClock, SystemClock, clock_from_settings

START = datetime(2030, 6, 1, tzinfo=UTC)


def test_without_a_start_the_clock_is_the_real_one() -> None:
    assert isinstance(clock_from_settings(ClockSettings()), SystemClock)


def test_a_simulated_clock_runs_speed_times_real_time_from_its_anchor() -> None:
    anchor = datetime.fromtimestamp(time.time() - 10, UTC)
    clock = clock_from_settings(ClockSettings(start=START, anchor=anchor, speed=3600.0))
    assert START + timedelta(hours=10) <= clock.now() < START + timedelta(hours=11)


def test_a_simulated_clock_without_an_anchor_starts_at_its_start() -> None:
    clock = clock_from_settings(ClockSettings(start=datetime.now(UTC) - timedelta(days=1), speed=1.0))
    assert datetime.now(UTC) - timedelta(days=1, minutes=1) < clock.now() < datetime.now(UTC)


def test_a_simulated_span_takes_span_over_speed_real_seconds() -> None:
    assert SimulatedClock(START, START, 86400.0).real_seconds_for(timedelta(days=63)) == 63.0


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        SimulatedClock(START.replace(tzinfo=None), START, 1.0)


def test_the_system_clock_is_aware_utc() -> None:
    assert SystemClock().now().tzinfo is UTC

"""entitlements/_demo.py's options: a simulated clock the audits could not see the planted faults at."""

from __future__ import annotations

import pytest

from config import load_settings
from entitlements._demo import DemoOptions, _check_the_clock
from schema.errors import DemoError


def test_a_clock_so_fast_that_a_cancellation_expires_within_the_overlap_tolerance_is_refused() -> None:
    with pytest.raises(DemoError, match="too fast: 63 days must last at least 3 s"):
        _check_the_clock(DemoOptions(speed=63 * 86_400 / 2.5), load_settings())

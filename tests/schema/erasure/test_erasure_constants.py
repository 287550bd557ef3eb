"""schema/erasure-channel-constants.json and schema/erasure/_constants.py: the arithmetic holds."""

from __future__ import annotations

import re

import pytest

from schema.erasure import CHANNEL_CONSTANTS
from tests.schema.erasure.erasure_test_support import SCHEMA_DIR, load_schema_file

C = CHANNEL_CONSTANTS
SEED_NAMES = {
    "handlerTimeoutCapSeconds": 60,
    "visibilityTimeoutMultiplier": 6,
    "visibilityTimeoutCapSeconds": 360,
    "maxReceiveCount": 5,
    "passTwoDelayCapSeconds": 300,
    "batchTimeoutCapSeconds": 60,
    "clockSkewAllowanceSeconds": 60,
    "expiryPeriodSeconds": 3300,
    "roundPublishBoundSeconds": 600,
    "queueRetentionSeconds": 86400,
    "duplicateAfterCompletionWindowSeconds": 3480,
}


def test_r_covers_both_passes_redeliveries() -> None:
    # R >= 2(N - 1)V + 2T + X
    required = (
        2 * (C.max_receive_count - 1) * C.visibility_timeout_cap_seconds
        + 2 * C.handler_timeout_cap_seconds
        + C.pass_two_delay_cap_seconds
    )
    assert C.expiry_period_seconds >= required


def test_r_stays_inside_the_queue_retention() -> None:
    assert C.expiry_period_seconds <= C.queue_retention_seconds


def test_v_is_the_multiplier_times_t() -> None:
    assert C.visibility_timeout_cap_seconds == C.visibility_timeout_multiplier * C.handler_timeout_cap_seconds


def test_b_is_at_most_t() -> None:
    assert C.batch_timeout_cap_seconds <= C.handler_timeout_cap_seconds


def test_the_duplicate_window_is_r_plus_s_plus_t_plus_b() -> None:
    assert C.duplicate_after_completion_window_seconds == (
        C.expiry_period_seconds
        + C.clock_skew_allowance_seconds
        + C.handler_timeout_cap_seconds
        + C.batch_timeout_cap_seconds
    )


def test_the_file_declares_every_constant_of_the_seeds_table_with_its_value() -> None:
    document = load_schema_file("erasure-channel-constants.json")
    assert {name: value for name, value in document.items() if name != "$comment"} == SEED_NAMES


def test_the_package_reads_the_file() -> None:
    assert C.model_dump(by_alias=True, exclude={"comment"}) == SEED_NAMES


@pytest.mark.parametrize("name", sorted(name for name, value in SEED_NAMES.items() if value >= 100))
def test_no_code_repeats_a_distinctive_constant(name: str) -> None:
    value = SEED_NAMES[name]
    sources = sorted((SCHEMA_DIR / "erasure").glob("*.py"))
    assert sources
    for source in sources:
        text = source.read_text(encoding="utf-8").replace("_", "")
        assert not re.search(rf"(?<![0-9]){value}(?![0-9])", text), (source.name, value)

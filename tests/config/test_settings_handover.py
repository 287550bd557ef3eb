"""config/settings.py, the switch-over's handover time (ENTITLEMENTS_SOURCE__HANDOVER_AT): read as a
whole second in UTC, refused by its variable and rule otherwise."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from config import SettingsError, load_settings


def test_no_handover_time_is_set_by_default() -> None:
    assert load_settings().source.handover_at is None


def test_a_handover_time_in_another_zone_is_read_as_the_same_moment_in_utc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENTITLEMENTS_SOURCE__HANDOVER_AT", "2026-12-03T03:00:00+01:00")
    at = load_settings().source.handover_at
    assert at == datetime(2026, 12, 3, 2, 0, 0, tzinfo=UTC)
    assert at is not None and at.utcoffset() == UTC.utcoffset(None)


@pytest.mark.parametrize(
    ("value", "rule"),
    [("2026-12-03T02:00:00", "handover_at_zone"), ("2026-12-03T02:00:00.250Z", "handover_at_second")],
)
def test_a_handover_time_that_is_not_a_whole_utc_second_is_refused_by_its_rule(
    monkeypatch: pytest.MonkeyPatch, value: str, rule: str
) -> None:
    monkeypatch.setenv("ENTITLEMENTS_SOURCE__HANDOVER_AT", value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    (problem,) = caught.value.problems
    assert problem.startswith(f"ENTITLEMENTS_SOURCE__HANDOVER_AT: {rule}: ")
    assert value not in str(caught.value)

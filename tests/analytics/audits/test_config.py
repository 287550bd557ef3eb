"""analytics/audits/_config.py and defaults.toml: thresholds and parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.audits import load_checks, load_config
from analytics.audits._config import AuditConfigError, Thresholds
from config import PolicySettings

KNOWN = frozenset(c.name for c in load_checks())


def test_the_defaults_give_every_check_thresholds() -> None:
    config = load_config()
    assert set(config.checks) == KNOWN
    assert all(t.warn is not None for t in config.checks.values())


def test_the_defaults_make_every_check_an_error_at_one_finding_but_the_admitted_gap_and_refusals() -> None:
    config = load_config()
    soft = {name for name, t in config.checks.items() if t.error != 1}
    assert soft == {
        "deleted_account_row_not_removed",
        "deleted_account_row_not_removed_ever",
        "guard_refusals",
    }


def test_a_file_replaces_the_defaults_check_by_check(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[parameters]\nmax_rows = 7\n[checks.guard_refusals]\nwarn = 2\nerror = 5\n")
    config = load_config(path, known_checks=KNOWN)
    assert config.thresholds("guard_refusals") == Thresholds(warn=2, error=5)
    assert config.thresholds("stale_write") == Thresholds(warn=1, error=1)
    assert config.parameters.max_rows == 7 and config.parameters.ttl_tolerance_seconds == 3600


def test_a_file_naming_an_unknown_check_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[checks.stale_writes]\nwarn = 1\n")
    with pytest.raises(AuditConfigError, match="stale_writes"):
        load_config(path, known_checks=KNOWN)


def test_a_warn_threshold_above_the_error_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[checks.stale_write]\nwarn = 3\nerror = 2\n")
    with pytest.raises(AuditConfigError, match="warn must not exceed error"):
        load_config(path)


def test_a_file_that_is_not_toml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[checks\n")
    with pytest.raises(AuditConfigError, match="not valid TOML"):
        load_config(path)


def test_the_policy_days_come_from_the_settings() -> None:
    config = load_config(policy=PolicySettings(cleanup_ttl_days=30, stale_entitlement_ttl_days=2))
    assert (config.policy.cleanup_ttl_days, config.policy.stale_entitlement_ttl_days) == (30, 2)

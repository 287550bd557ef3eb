"""The demo, end to end through the real daemon: the audit finds exactly what the simulator planted, and
nothing in a clean run."""

from __future__ import annotations

from pathlib import Path

import pytest

from entitlements._demo import DemoOptions, DemoResult, run_demo

pytestmark = pytest.mark.kcl

# What each planted fault must make the audit report (a check's name to the fault that explains it).
EXPECTED_FOR_PLANTED_FAULTS = {
    "duplicate_active_rows": "stale_put_race",
    "duplicate_active_rows_ever": "stale_put_race",
    "stale_write": "stale_put_race",
    "cleanup_names_active_account_ever": "failed_reactivation_delete",
    "cleanup_ttl_not_actionable": "string_ttl and millisecond_ttl",
    "cleanup_ttl_not_actionable_ever": "string_ttl and millisecond_ttl",
    "guard_refusals": "stale_put_race and failed_reactivation_delete",
}


def small_demo(tmp_path: Path, *, faults: bool) -> DemoResult:
    options = DemoOptions(
        state_dir=tmp_path / "demo", users=60, operations=400, rate=300, faults=faults, seed=11
    )
    return run_demo(options, progress=lambda line: None)


def test_the_demo_audit_finds_exactly_the_planted_faults(tmp_path: Path) -> None:
    result = small_demo(tmp_path, faults=True)
    failing = {r.name: r.count for r in result.audit.results if r.count}
    assert set(failing) == set(EXPECTED_FOR_PLANTED_FAULTS)
    assert failing["cleanup_ttl_not_actionable"] == 2
    assert failing["guard_refusals"] == 2
    assert failing["duplicate_active_rows"] == 1
    assert result.consumer_stats["quarantined"] == 0


def test_a_clean_demo_run_has_no_findings(tmp_path: Path) -> None:
    result = small_demo(tmp_path, faults=False)
    assert [r.name for r in result.audit.results if r.count] == []
    assert result.outcomes_by_kind.get("cleanup.deleted", 0) > 0
    assert result.outcomes_by_kind.get("cleanup.deleted") == result.outcomes_by_kind.get("cleanup.row_marked")

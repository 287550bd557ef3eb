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
        state_dir=tmp_path / "demo", users=60, operations=400, rate=300, faults=faults, seed=11, races=2
    )
    return run_demo(options, progress=lambda line: None)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    return small_demo(tmp_path_factory.mktemp("faulty"), faults=True)


def test_the_demo_audit_finds_exactly_the_planted_faults(faulty: DemoResult) -> None:
    result = faulty
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


def test_each_forced_race_is_refused_by_save_if_active_and_recorded(faulty: DemoResult) -> None:
    races = faulty.races
    assert (races.relink_vs_second_signup, races.relink_vs_cancellation) == ({"404": 2}, {"404": 2})
    assert faulty.outcomes_by_kind.get("link.not_active", 0) >= 4


def test_the_forced_race_through_the_unguarded_write_overwrites_one_row(faulty: DemoResult) -> None:
    assert (faulty.races.unguarded_stale_put, faulty.races.overwritten_rows) == ({"200": 1}, 1)


def test_the_same_account_again_writes_nothing(faulty: DemoResult) -> None:
    assert faulty.races.same_account_again == {"200": 1}

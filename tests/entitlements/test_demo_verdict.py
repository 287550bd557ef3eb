"""entitlements/_demo_verdict.py: the demo's verdict, the audits' findings against the manifest."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devstack.direct_writes import DirectWrites
from devstack.planted_faults import FaultKind, PlantedFault, plant_faults
from devstack.workload import SimulationConfig
from entitlements._demo_verdict import expected_rows, judge, read_manifest, write_manifest
from schema.clock import SimulatedClock

KINDS = (FaultKind.FAILED_REACTIVATION_DELETE, FaultKind.STRING_TTL, FaultKind.TOKEN_CANARY)


@dataclass
class Result:
    name: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    rows_involved: int = -1

    def __post_init__(self) -> None:
        if self.rows_involved < 0:
            self.rows_involved = len(self.rows)

    @property
    def count(self) -> int:
        return self.rows_involved


@dataclass
class Audit:
    results: list[Result]


def planted() -> list[PlantedFault]:
    """Three faults as the demo plants them (described, nothing written)."""
    clock = SimulatedClock(datetime(2026, 1, 1, tzinfo=UTC), datetime.now(UTC), 1.0)
    table = DirectWrites(client=None, table_name="entitlements")  # type: ignore[arg-type]
    return plant_faults(SimulationConfig("entitlements", seed=3), table, clock, KINDS, unwritten=KINDS)


def audit_finding(faults: list[PlantedFault], *, skip: str = "", extra: tuple[Result, ...] = ()) -> Audit:
    """An audit reporting every row the faults' kinds make (but `skip`'s), plus `extra` results."""
    by_check: dict[str, list[dict[str, Any]]] = {}
    for fault in faults:
        if fault.fault_id == skip:
            continue
        for check, keys in expected_rows(fault).items():
            for user, account in keys.elements():
                by_check.setdefault(check, []).append({"user_id": user, "array_account_id": account})
    return Audit([Result(check, rows) for check, rows in by_check.items()] + list(extra))


def nowhere(token: str) -> list[str]:
    return []


def test_every_planted_fault_found_and_nothing_else_is_demo_ok_listing_them() -> None:
    faults = planted()
    verdict = judge(faults, audit_finding(faults), traces_of=nowhere)
    assert verdict.lines() == [
        "demo OK: 3 planted faults found, 0 unexpected findings",
        "- F001 failed_reactivation_delete: cleanup_names_active_account_ever, guard_refusals",
        "- F002 string_ttl: cleanup_ttl_not_actionable, cleanup_ttl_not_actionable_ever",
        "- F003 token_canary: its processor token is in no lake file, report or log",
    ]


def test_a_planted_fault_the_audits_did_not_report_fails_the_verdict_and_is_named() -> None:
    faults = planted()
    verdict = judge(faults, audit_finding(faults, skip="F002"), traces_of=nowhere)
    assert not verdict.ok
    assert verdict.lines()[0] == "demo FAILED: 2 of 3 planted faults found, 0 unexpected findings"
    assert verdict.lines()[-1] == (
        "- MISSING F002 string_ttl: not reported by "
        "cleanup_ttl_not_actionable, cleanup_ttl_not_actionable_ever"
    )


def test_a_finding_no_planted_fault_explains_is_unexpected() -> None:
    faults = planted()
    stray = Result("deleted_account_row_not_removed", [{"user_id": "u-9", "array_account_id": "a-9"}] * 2)
    verdict = judge(faults, audit_finding(faults, extra=(stray,)), traces_of=nowhere)
    assert verdict.lines()[0] == "demo FAILED: 3 of 3 planted faults found, 2 unexpected findings"
    assert (
        verdict.lines()[-1]
        == "- UNEXPECTED deleted_account_row_not_removed: 2 row(s) no planted fault explains"
    )


def test_a_second_row_for_a_planted_fault_is_unexpected() -> None:
    faults = planted()
    audit = audit_finding(faults)
    guard = next(r for r in audit.results if r.name == "guard_refusals")
    guard.rows.append(dict(guard.rows[0]))
    guard.rows_involved += 1
    assert judge(faults, audit, traces_of=nowhere).unexpected == {"guard_refusals": 1}


def test_rows_counted_but_not_returned_are_unexpected() -> None:
    faults = planted()
    audit = audit_finding(faults)
    audit.results[0].rows_involved += 5  # a report truncated at its row limit
    assert judge(faults, audit, traces_of=nowhere).unexpected == {audit.results[0].name: 5}


def test_a_canary_token_found_in_the_runs_files_fails_the_verdict_naming_the_file() -> None:
    faults = planted()
    verdict = judge(faults, audit_finding(faults), traces_of=lambda token: ["daemon/daemon-demo-worker.log"])
    assert verdict.lines()[-1] == (
        "- MISSING F003 token_canary: its processor token was found in daemon/daemon-demo-worker.log"
    )


def test_the_canary_is_looked_for_by_its_own_token() -> None:
    faults = planted()
    asked: list[str] = []

    def traces_of(token: str) -> list[str]:
        asked.append(token)
        return []

    judge(faults, audit_finding(faults), traces_of=traces_of)
    assert asked == [faults[2].processor_token]


def test_a_run_that_did_not_finish_cleanly_fails_the_verdict_and_says_why() -> None:
    faults = planted()
    verdict = judge(
        faults, audit_finding(faults), traces_of=nowhere, differences=["the retry queue was not empty"]
    )
    assert (verdict.ok, verdict.lines()[-1]) == (False, "- NOT CLEAN the retry queue was not empty")


def test_the_verdict_lines_hold_no_user_account_or_token() -> None:
    faults = planted()
    stray = Result("stale_write", [{"user_id": "u-9", "array_account_id": "a-9"}])
    text = "\n".join(
        judge(faults[:2], audit_finding(faults[:2], skip="F001", extra=(stray,)), traces_of=nowhere).lines()
    )
    secrets = [f.user_id for f in faults] + [f.array_account_id for f in faults] + ["u-9", "a-9"]
    assert [s for s in secrets if s in text] == []


def test_the_manifest_reads_back_as_written(tmp_path: Path) -> None:
    faults = planted()
    write_manifest(tmp_path / "planted.json", 3, faults)
    assert read_manifest(tmp_path / "planted.json") == faults

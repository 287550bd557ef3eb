"""entitlements/commands/demo.py: what the demo prints once its run is over: counts a reader reads (never
a Python dict), the audit's summary instead of its whole report, where its lake is with the one export
line that points `entitlements sql` at it, and the verdict last; and (entitlements/_demo.py) the lines
the run writes while it waits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from analytics.audits import AuditReport, Status, load_config, run_audits
from analytics.lake import open_lake
from devstack.planted_faults import FaultKind, PlantedFault
from devstack.service_workload import SameUserBursts, WorkloadSummary
from entitlements._demo import DemoResult, ForcedRaces, _wait
from entitlements._demo_verdict import Verdict
from entitlements._progress import LINE_SECONDS
from entitlements.commands.demo import report_lines
from schema.errors import DemoError
from tests.analytics.audits.story import clean_story


@pytest.fixture(scope="module")
def audit(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    lake = open_lake(str(tmp_path_factory.mktemp("demo") / "lake"))
    clean_story().land(lake)
    clean = run_audits(lake, load_config())
    # One check made to fail (with rows), so that the summary has a failing check to list.
    first = clean.results[0].model_copy(update={"status": Status.ERROR, "rows_involved": 2})
    return clean.model_copy(update={"results": [first, *clean.results[1:]]})


def _result(audit: AuditReport, state: Path) -> DemoResult:
    workload = WorkloadSummary(seed=7, users=3, clients=2, operations_requested=4)
    workload.operations["signup"] = 3
    workload.answers["signup"] = {"409": 1, "201": 2}
    workload.same_user = SameUserBursts(bursts=1, requests=2, answers={"signup": {"201": 1, "409": 1}})
    fault = PlantedFault("F001", FaultKind.STRING_TTL, (), "arr-1")
    return DemoResult(
        workload=workload,
        races=ForcedRaces(relink_vs_second_signup={"404": 1}),
        planted=[fault, fault],
        events_by_type={"entitlement.created": 3},
        outcomes_by_kind={"cleanup.deleted": 1},
        consumer_stats={"records": 9, "quarantined": 0, "parked_batches": 0},
        audit=audit,
        report_paths={"markdown": state / "audit.md", "json": state / "audit.json"},
        verdict=Verdict(faults=(), unexpected={}, findings={}),
    )


def _printed(audit: AuditReport, tmp_path: Path) -> list[str]:
    return "\n".join(report_lines(_result(audit, tmp_path / "demo"), tmp_path / "demo")).splitlines()


def test_counts_are_printed_as_a_reader_reads_them_never_as_a_python_dict(
    audit: AuditReport, tmp_path: Path
) -> None:
    printed = _printed(audit, tmp_path)
    assert not [line for line in printed if "{" in line or "}" in line]
    assert "- signup: 3 (201: 2, 409: 1)" in printed
    assert f"- planted (manifest: {tmp_path / 'demo' / 'planted.json'}): string_ttl: 2" in printed
    assert "- relink held at Array while a second Array signup answered: 404: 1" in printed
    assert "- relink held at Array while a cancellation answered: none" in printed


def test_the_audit_is_its_summary_and_the_file_holding_the_whole_report(
    audit: AuditReport, tmp_path: Path
) -> None:
    printed = _printed(audit, tmp_path)
    counts = audit.counts
    assert printed[printed.index("## Audit") + 2].startswith(
        f"status {audit.status.value}: {counts['checks']} checks, {counts['pass']} pass"
    )
    failing = [r for r in audit.results if r.status.value != "pass"]
    assert audit.results[0] in failing
    assert [
        line for line in printed if line.startswith("- ") and (": warn, " in line or ": error, " in line)
    ] == [
        f"- {r.name}: {r.status.value}, {r.rows_involved} row{'' if r.rows_involved == 1 else 's'}"
        for r in failing
    ]
    assert f"The full report, each check's rows and what to do: {tmp_path / 'demo' / 'audit.md'}" in printed
    assert not [line for line in printed if line.startswith("| ")]  # no table of rows


def test_the_lake_is_named_with_the_export_line_that_points_sql_at_it(
    audit: AuditReport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    printed = "\n".join(report_lines(_result(audit, Path("var/demo")), Path("var/demo"))).splitlines()
    assert f"export ENTITLEMENTS_LAKE__ROOT={tmp_path / 'var' / 'demo' / 'lake'}" in printed


def test_the_verdict_comes_last(audit: AuditReport, tmp_path: Path) -> None:
    printed = _printed(audit, tmp_path)
    verdict = printed.index("## Verdict (the audits' findings against the manifest of what was planted)")
    assert [line for line in printed[verdict + 1 :] if line] == [
        "demo OK: 0 planted faults found, 0 unexpected findings"
    ]


# -- what the run says while it waits (entitlements/_demo.py's `_wait`, on an injected clock) ----------


class _Clock:
    """A monotonic clock that only `sleep` moves (and each poll, by `poll_seconds`, a slow condition)."""

    def __init__(self, poll_seconds: float = 0.0) -> None:
        self.now = 0.0
        self.poll_seconds = poll_seconds

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def until(self, seconds: float) -> Callable[[], bool]:
        def condition() -> bool:
            self.now += self.poll_seconds
            return self.now >= seconds

        return condition


def _waited(clock: _Clock, condition: Callable[[], bool], timeout: float = 60.0) -> list[str]:
    lines: list[str] = []
    _wait(condition, timeout, "the thing", lines.append, clock=lambda: clock.now, sleep=clock.sleep)
    return lines


def test_a_wait_that_ends_within_twice_the_line_interval_says_nothing() -> None:
    clock = _Clock()
    assert _waited(clock, clock.until(2 * LINE_SECONDS - 0.5)) == []


def test_a_long_wait_says_what_it_waits_for_every_line_interval_from_twice_that_on() -> None:
    clock = _Clock()
    lines = _waited(clock, clock.until(4 * LINE_SECONDS + 1))
    assert lines == [f"waiting for the thing: {n * LINE_SECONDS:.0f} s" for n in (2, 3, 4)]


def test_a_slow_poll_gives_one_line_for_the_intervals_it_overran() -> None:
    clock = _Clock(poll_seconds=2 * LINE_SECONDS + 1)  # each look takes longer than two intervals
    lines = _waited(clock, clock.until(5 * LINE_SECONDS))
    assert lines == ["waiting for the thing: 11 s", "waiting for the thing: 22 s"]


def test_a_wait_past_its_timeout_is_refused_naming_what_did_not_happen_after_its_lines() -> None:
    clock = _Clock()
    lines: list[str] = []
    with pytest.raises(DemoError, match="the thing did not happen within 12 s"):
        _wait(lambda: False, 12.0, "the thing", lines.append, clock=lambda: clock.now, sleep=clock.sleep)
    assert lines == ["waiting for the thing: 10 s"]

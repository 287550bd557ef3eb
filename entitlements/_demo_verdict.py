"""The demo's verdict: what the audits found against what the manifest says was planted.

The manifest (`planted.json` in the demo's state folder) lists each planted fault: its kind, its own
user, the account it concerns and the items it wrote. What each fault must make the audits report is
computed from that entry by the rule of its kind (`expected_rows`): which check, and which rows, keyed
by (user id, Array account id), the two columns every check's rows carry. Nothing beside the manifest
says what to expect, so a fault recorded there but never written (`demo --suppress-fault KIND`) is
reported missing, and a finding no fault explains is reported unexpected.

A canary (`token_canary`) is found when its processor token is in no lake file, report or log of the
run: the lake never holds a processor token.

The verdict's lines hold fault ids, kinds, check names and counts: never a user id, an account or a
token.
"""

from __future__ import annotations

__all__ = [
    "MANIFEST_NAME",
    "FaultVerdict",
    "Verdict",
    "expected_rows",
    "judge",
    "read_manifest",
    "write_manifest",
]

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from devstack.planted_faults import FaultKind, PlantedFault, PlantedItem
from schema.table import ENTITLEMENT_SK_PREFIX

MANIFEST_NAME = "planted.json"

Key = tuple[str, str]  # (user id, Array account id) of one finding row


def _accounts_of_rows(fault: PlantedFault, *roles: str) -> list[str]:
    return [
        item.sk.removeprefix(ENTITLEMENT_SK_PREFIX)
        for item in fault.items
        if item.role in roles and item.sk.startswith(ENTITLEMENT_SK_PREFIX)
    ]


def expected_rows(fault: PlantedFault) -> dict[str, Counter[Key]]:
    """The rows each check must report for `fault`, by check name (none for a canary)."""
    user, account = fault.user_id, fault.array_account_id
    own = Counter([(user, account)])
    if fault.kind is FaultKind.STALE_PUT_RACE:
        # The retired row written back Active beside the new one, and the stale record naming it.
        both = Counter((user, a) for a in _accounts_of_rows(fault, "resurrected_row", "new_row"))
        return {
            "duplicate_active_rows": both,
            "duplicate_active_rows_ever": Counter(both),
            "stale_write": Counter(own),
            "cleanup_names_active_account_ever": Counter(own),  # the stale record, while it lasted
            "guard_refusals": Counter(own),  # its expiry named the account in use: refused
        }
    if fault.kind is FaultKind.FAILED_REACTIVATION_DELETE:
        return {"cleanup_names_active_account_ever": Counter(own), "guard_refusals": Counter(own)}
    if fault.kind in (FaultKind.STRING_TTL, FaultKind.MILLISECOND_TTL):
        return {"cleanup_ttl_not_actionable": Counter(own), "cleanup_ttl_not_actionable_ever": Counter(own)}
    return {}


@dataclass(frozen=True, slots=True)
class FaultVerdict:
    fault_id: str
    kind: str
    found_in: tuple[str, ...]  # checks that reported its rows (or where a canary was looked for)
    missing: tuple[str, ...]  # checks that did not report (all of) its rows, or the canary's trace

    @property
    def found(self) -> bool:
        return not self.missing

    def line(self) -> str:
        if self.kind == FaultKind.TOKEN_CANARY.value:
            where = "its processor token is in no lake file, report or log"
            if self.missing:
                where = f"its processor token was found in {', '.join(self.missing)}"
            return f"{self.fault_id} {self.kind}: {where}"
        if self.missing:
            return f"{self.fault_id} {self.kind}: not reported by {', '.join(self.missing)}"
        return f"{self.fault_id} {self.kind}: {', '.join(self.found_in)}"


@dataclass(frozen=True, slots=True)
class Verdict:
    faults: tuple[FaultVerdict, ...]
    unexpected: dict[str, int]  # check -> finding rows no planted fault explains
    findings: dict[str, int]  # every check with findings -> its count (what its thresholds compare)
    differences: tuple[str, ...] = field(default=())  # the run itself did not finish cleanly

    @property
    def ok(self) -> bool:
        return all(f.found for f in self.faults) and not self.unexpected and not self.differences

    @property
    def unexpected_count(self) -> int:
        return sum(self.unexpected.values())

    def headline(self) -> str:
        found = sum(f.found for f in self.faults)
        if self.ok:
            return f"demo OK: {found} planted faults found, 0 unexpected findings"
        return (
            f"demo FAILED: {found} of {len(self.faults)} planted faults found, "
            f"{self.unexpected_count} unexpected findings"
        )

    def lines(self) -> list[str]:
        out = [self.headline()]
        out += [f"- {f.line()}" for f in self.faults if f.found]
        out += [f"- MISSING {f.line()}" for f in self.faults if not f.found]
        out += [
            f"- UNEXPECTED {check}: {count} row(s) no planted fault explains"
            for check, count in sorted(self.unexpected.items())
        ]
        out += [f"- NOT CLEAN {difference}" for difference in self.differences]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "headline": self.headline(),
            "faults": [
                {
                    "fault_id": f.fault_id,
                    "kind": f.kind,
                    "found": f.found,
                    "found_in": list(f.found_in),
                    "missing": list(f.missing),
                }
                for f in self.faults
            ],
            "unexpected": dict(sorted(self.unexpected.items())),
            "findings": dict(sorted(self.findings.items())),
            "differences": list(self.differences),
        }


def write_manifest(path: Path, seed: int, faults: Iterable[PlantedFault]) -> None:
    """What was planted, with the keys the verdict matches on (synthetic ids; the file stays local)."""
    document = {"seed": seed, "faults": [f.to_json(include_keys=True) for f in faults]}
    path.write_text(json.dumps(document, indent=1) + "\n")


def read_manifest(path: Path) -> list[PlantedFault]:
    document = json.loads(path.read_text())
    return [
        PlantedFault(
            fault_id=entry["fault_id"],
            kind=FaultKind(entry["kind"]),
            items=tuple(PlantedItem(i["role"], i["pk"], i["sk"]) for i in entry["items"]),
            array_account_id=entry["array_account_id"],
            processor_token=entry.get("processor_token"),
            user_id=entry["user_id"],
        )
        for entry in document["faults"]
    ]


class CheckFindings(Protocol):
    """What the verdict reads of one check's result (`analytics.audits.CheckResult` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def rows_involved(self) -> int: ...
    @property
    def rows(self) -> list[dict[str, Any]]: ...


class AuditFindings(Protocol):
    """What the verdict reads of an audit run (`analytics.audits.AuditReport` has it)."""

    @property
    def results(self) -> Sequence[CheckFindings]: ...


def _found_rows(audit: AuditFindings) -> tuple[dict[str, Counter[Key]], dict[str, int]]:
    """Each failing check's rows by key, and the rows it counted but did not return (truncated, or
    without the key's columns)."""
    rows: dict[str, Counter[Key]] = {}
    unkeyed: dict[str, int] = {}
    for result in audit.results:
        if not result.rows_involved:
            continue
        keys = Counter(
            (str(row["user_id"]), str(row["array_account_id"]))
            for row in result.rows
            if row.get("user_id") is not None and row.get("array_account_id") is not None
        )
        rows[result.name] = keys
        rest = result.rows_involved - sum(keys.values())
        if rest:
            unkeyed[result.name] = rest
    return rows, unkeyed


def judge(
    manifest: list[PlantedFault],
    audit: AuditFindings,
    *,
    traces_of: Callable[[str], list[str]],
    differences: Iterable[str] = (),
) -> Verdict:
    """The verdict of a run: every planted fault's expected rows against the audit's, and each canary
    token against `traces_of` (the places of the run's output that hold it)."""
    found, unexpected = _found_rows(audit)
    verdicts: list[FaultVerdict] = []
    for fault in manifest:
        if fault.kind is FaultKind.TOKEN_CANARY:
            traces = traces_of(fault.processor_token or "") if fault.processor_token else []
            verdicts.append(
                FaultVerdict(fault.fault_id, fault.kind.value, ("lake", "reports", "logs"), tuple(traces))
            )
            continue
        present: list[str] = []
        missing: list[str] = []
        for check, wanted in expected_rows(fault).items():
            have = found.get(check, Counter())
            short = wanted - have
            have.subtract(wanted - short)  # what this fault explains is no longer left to explain
            (missing if short else present).append(check)
        verdicts.append(FaultVerdict(fault.fault_id, fault.kind.value, tuple(present), tuple(missing)))
    for check, left in found.items():
        extra = sum(n for n in left.values() if n > 0)
        if extra:
            unexpected[check] = unexpected.get(check, 0) + extra
    findings = {r.name: r.count for r in audit.results if r.rows_involved}
    return Verdict(tuple(verdicts), unexpected, findings, tuple(differences))

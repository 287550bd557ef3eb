"""What an audit run found: one result per check, and the report that holds them."""

from __future__ import annotations

__all__ = ["AuditReport", "CheckResult", "Status", "StoredFailures"]

import json
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, computed_field, model_validator

from analytics.audits._checks import Scope, TimeAxis
from analytics.audits._config import AuditParameters

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Status(StrEnum):
    PASS = "pass"  # noqa: S105  (a status, not a secret)
    WARN = "warn"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"pass": 0, "warn": 1, "error": 2}[self.value]


class CheckResult(BaseModel):
    """One check's findings.

    `count` is what the thresholds compare with: `groups` for a check that counts duplicates, else
    `rows_involved`. For duplicates, `surplus_rows` = `rows_involved` - `groups` (the rows beyond one per
    group). `rows` holds the first `max_rows` offending rows, lake columns only; `timeline` counts all of
    them per UTC day of the check's time column, which is on `clock` (stream time, the processor's clock).
    """

    model_config = _FROZEN
    name: str
    scope: Scope
    title: str
    invariant: str
    remediation: str = ""
    docs: list[str] = []  # repository-relative pages (with an anchor): the check's section first
    description: str
    sql_file: str
    status: Status
    count: int
    rows_involved: int
    groups: int | None = None
    surplus_rows: int | None = None
    group_by: list[str] = []
    warn_at: int | None = None
    error_at: int | None = None
    columns: list[str] = []
    rows: list[dict[str, Any]] = []
    rows_truncated: bool = False
    time_column: str | None = None
    clock: TimeAxis | None = None
    timeline: dict[str, int] = {}
    seconds: float = 0.0
    # What the check cannot see, for its readers: on a bootstrapped lake, an `ever` check's history
    # before the lake's history start (analytics.lake.history_start).
    note: str = ""

    @property
    def counts_duplicates(self) -> bool:
        return bool(self.group_by)


class StoredFailures(BaseModel):
    """Where `--store-failures` put the failing checks' rows: one commit to the lake's `dataset`, every
    row tagged with `audit_id`."""

    model_config = _FROZEN
    dataset: str
    audit_id: str
    version: int
    checks: int
    rows: int


class AuditReport(BaseModel):
    """Every check's result, and what the run was made of (no personal data beyond the failing rows).

    Its JSON starts with `status` (the worst check's) and `counts` (checks per status, and rows found):
    what a schedule or a CI system reads first."""

    model_config = _FROZEN
    generated_at: datetime
    lake: str
    source: Literal["snapshot", "log"]
    as_of: datetime | None = None
    log_end: datetime | None = None  # the latest stream creation time in the (as-of) log
    log_rows: int = 0  # change-log rows landed (replays included: a measure of size, not of events)
    outcome_rows: int = 0
    policy: dict[str, int]
    parameters: AuditParameters
    erasure_exceptions: int = 0
    history_starts_at: datetime | None = None  # a bootstrapped lake's T: no history before it
    stored_failures: StoredFailures | None = None
    results: list[CheckResult]

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        """`status` and `counts` are written out for readers and derived again when read back."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in {"status", "counts"}}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def status(self) -> Status:
        """The worst status of any check: pass, warn or error."""
        return max((r.status for r in self.results), key=lambda s: s.rank, default=Status.PASS)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counts(self) -> dict[str, int]:
        """Checks run, checks per status, and findings (rows) of the checks that did not pass."""
        per_status = {status.value: len(self.with_status(status)) for status in Status}
        failing = sum(r.rows_involved for r in self.results if r.status is not Status.PASS)
        return {"checks": len(self.results), **per_status, "failing_rows": failing}

    @property
    def exit_code(self) -> int:
        """0 when nothing reached an error threshold, 1 when something did."""
        return 1 if self.status is Status.ERROR else 0

    def with_status(self, status: Status) -> list[CheckResult]:
        return [r for r in self.results if r.status is status]

    def failing(self) -> list[CheckResult]:
        """Checks with findings, errors first."""
        found = [r for r in self.results if r.rows_involved]
        return sorted(found, key=lambda r: -r.status.rank)

    def result(self, name: str) -> CheckResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(name)

    def to_json(self) -> str:
        document = self.model_dump(mode="json")
        ordered = {"status": document.pop("status"), "counts": document.pop("counts"), **document}
        return json.dumps(ordered, indent=1, ensure_ascii=False) + "\n"

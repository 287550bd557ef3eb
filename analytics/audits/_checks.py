"""The checks: one SQL file each in analytics/sql/audits/, a SELECT returning the offending rows
(sqlmesh-style), with its metadata in a comment header:

    -- audit: duplicate_active_rows          the check's name (equal to the file's stem)
    -- scope: now                            now (the table's state) or ever (its history)
    -- title: Users with more than one Active row
    -- invariant: the rule that must hold, in words a reader can check against docs/table.md
    -- remediation: what to do about a finding (commands, who to look at)
    -- docs: docs/table.md#statuses, ...    the project's pages the rule and the fix are explained on
    -- group_by: user_id                     optional: the check counts duplicates (groups, surplus, rows)
    -- time: changed_at                      optional: the column that dates a finding (charts)
    -- clock: stream                         with `time`: the clock that column is on (TimeAxis: stream
                                             time, the processor's clock, business time); the HTML
                                             draws one chart per clock, never two clocks on one axis
    -- Any other comment lines are the description.

Files whose names start with `_` are not checks (`_parameters.sql` sets the inputs for the DuckDB CLI).
"""

from __future__ import annotations

__all__ = [
    "AUDIT_SQL_DIR",
    "CHECK_DOCS",
    "CHECK_ORDER",
    "Check",
    "CheckDefinitionError",
    "Scope",
    "TimeAxis",
    "load_checks",
]

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path

from analytics._sql_files import definition_files, in_listing_order, read_header
from schema.errors import TerminalError

AUDIT_SQL_DIR = Path(__file__).resolve().parents[1] / "sql" / "audits"

# The order the reports list the checks in: the rows' rules first, then the cleanup records', cleanup's own
# outcomes, and the contract's unknowns last.
CHECK_ORDER: tuple[str, ...] = (
    "duplicate_active_rows",
    "duplicate_active_rows_ever",
    "entitlement_row_with_ttl",
    "entitlement_row_with_ttl_ever",
    "ttl_removal_of_non_cleanup",
    "unexpected_delete",
    "stale_record_removed_not_by_ttl",
    "stale_write",
    "cleanup_names_active_account",
    "cleanup_names_active_account_ever",
    "cleanup_ttl_not_actionable",
    "cleanup_ttl_not_actionable_ever",
    "expired_cleanup_without_final_outcome",
    "deleted_account_row_not_removed",
    "deleted_account_row_not_removed_ever",
    "removed_without_cleanup",
    "removed_without_cleanup_ever",
    "array_account_without_row",
    "guard_refusals",
    "unknown_status",
    "unknown_status_ever",
    "unknown_item_kind",
    "unknown_item_kind_ever",
)

_HEADER = re.compile(
    r"\A--\s?(audit|scope|title|invariant|remediation|docs|group_by|time|clock):\s*(.*?)\s*\Z"
)
# Every check's own section in the operators' page: its remediation, with links to the pages it names.
CHECK_DOCS = "docs/operations/audits.md"
_NAME = re.compile(r"\A[a-z][a-z0-9_]*\Z")


class CheckDefinitionError(TerminalError):
    """An audit SQL file whose header is missing or malformed."""


class Scope(StrEnum):
    NOW = "now"  # the table's state: the current snapshot, or the state at --as-of
    EVER = "ever"  # the whole history up to then


class TimeAxis(StrEnum):
    """The clock a check's time column is on (schema/lake.md, "Time axes")."""

    STREAM = "stream"  # the stream's ApproximateCreationDateTime: changed_at, valid_from, created_at
    PROCESSOR = "processor"  # the processor's clock: outcomes.occurred_at (simulated in demos)
    BUSINESS = "business"  # the items' own createdAt/updatedAt/ttl, as the service wrote them

    @property
    def label(self) -> str:
        """How a chart names the clock, in its title and on its axis."""
        return {
            TimeAxis.STREAM: "stream time (ApproximateCreationDateTime)",
            TimeAxis.PROCESSOR: "processor clock (outcomes' occurred_at)",
            TimeAxis.BUSINESS: "business time (the items' createdAt/updatedAt)",
        }[self]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    scope: Scope
    title: str
    invariant: str
    remediation: str
    docs: tuple[str, ...]  # repository-relative pages with an anchor, the check's own section first
    description: str
    group_by: tuple[str, ...]
    time_column: str | None
    clock: TimeAxis | None  # the time column's clock; set exactly when time_column is
    sql: str
    path: Path

    @property
    def sql_file(self) -> str:
        """The file's path from the repository root (analytics/sql/audits/<name>.sql)."""
        return f"analytics/sql/audits/{self.path.name}"


def _parse(path: Path) -> Check:
    header = read_header(path, _HEADER)
    fields = header.fields
    missing = [key for key in ("audit", "scope", "title", "invariant", "remediation") if not fields.get(key)]
    if missing:
        raise CheckDefinitionError(f"{path.name}: header lacks {', '.join(missing)}")
    if fields["audit"] != path.stem or not _NAME.match(path.stem):
        raise CheckDefinitionError(f"{path.name}: the audit name must equal the file name")
    try:
        scope = Scope(fields["scope"])
    except ValueError:
        raise CheckDefinitionError(f"{path.name}: scope is 'now' or 'ever'") from None
    time_column = fields.get("time") or None
    clock = _clock(path, time_column, fields.get("clock") or None)
    group_by = tuple(c.strip() for c in fields.get("group_by", "").split(",") if c.strip())
    pages = tuple(page.strip() for page in fields.get("docs", "").split(",") if page.strip())
    own = f"{CHECK_DOCS}#{path.stem}"
    return Check(
        name=path.stem,
        scope=scope,
        title=fields["title"],
        invariant=fields["invariant"],
        remediation=fields["remediation"],
        docs=(own, *(page for page in pages if page != own)),
        description=header.description,
        group_by=group_by,
        time_column=time_column,
        clock=clock,
        sql=header.text,
        path=path,
    )


def _clock(path: Path, time_column: str | None, clock: str | None) -> TimeAxis | None:
    """A time column's clock, declared beside it: a chart never mixes two."""
    if time_column is None:
        if clock is not None:
            raise CheckDefinitionError(f"{path.name}: a clock is declared only with a time column")
        return None
    choices = "|".join(c.value for c in TimeAxis)
    if clock is None:
        raise CheckDefinitionError(f"{path.name}: a time column declares its clock: '-- clock: {choices}'")
    try:
        return TimeAxis(clock)
    except ValueError:
        raise CheckDefinitionError(f"{path.name}: clock is one of {choices}") from None


@cache
def _load(directory: Path) -> tuple[Check, ...]:
    return in_listing_order((_parse(p) for p in definition_files(directory)), CHECK_ORDER)


def load_checks(directory: Path = AUDIT_SQL_DIR) -> tuple[Check, ...]:
    """Every check defined in `directory`, in report order."""
    return _load(directory.resolve())

"""The checks: SQL files in analytics/sql/audits/, each a SELECT returning the offending rows
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

A rule checked both now and ever is one file of both scopes, `-- scope: now, ever`, holding two checks:
`<stem>` (now) and `<stem>_ever` (ever). Its unprefixed keys and description lines are both checks';
`-- now.title: ...` / `-- ever.title: ...` (any key but audit and scope) give one scope's value in place
of the shared one, and `-- now: ...` / `-- ever: ...` lines are one scope's description. Its SQL defines
the CTEs `now_findings` and `ever_findings` and ends with `SCOPE_SELECTOR`, which reads the one the
DuckDB variable `audit_scope` names: the runner binds it to the check's scope (`_parameters.sql` sets
`now` for the DuckDB CLI). The rows, their columns and their order differ between the two scopes, so
each keeps its own findings CTE, side by side under one header; a rule both scopes apply alike is one
CTE above them, written once. A CTE DuckDB is not asked for is not bound.

Files whose names start with `_` are not checks (`_parameters.sql` sets the inputs for the DuckDB CLI).
"""

from __future__ import annotations

__all__ = [
    "AUDIT_SQL_DIR",
    "CHECK_DOCS",
    "CHECK_ORDER",
    "SCOPE_SELECTOR",
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

from analytics._sql_files import SqlHeader, definition_files, in_listing_order, read_header
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

_KEYS = "audit|scope|title|invariant|remediation|docs|group_by|time|clock"
# A key, a scope's own key (`now.title`) or a scope's own description line (`now: ...`), and its value.
_HEADER = re.compile(rf"\A--\s?((?:(?:now|ever)\.)?(?:{_KEYS})|now|ever):\s*(.*?)\s*\Z")
_SHARED_ONLY = ("audit", "scope")
_SCOPE_NAMES = frozenset(("now", "ever"))  # never a scope's own: they say which checks the file holds
# How a file of both scopes ends: the CTE the bound scope names, from these two only (an unknown scope
# is an error, never a relation looked up by its text). Unset, it is `now`: the file runs as its now
# check in any session over the lake's views, as a single-scope file does.
SCOPE_SELECTOR = """SELECT *
FROM query_table(
    CASE coalesce(getvariable('audit_scope'), 'now')
        WHEN 'now' THEN 'now_findings'
        WHEN 'ever' THEN 'ever_findings'
        ELSE error('audit_scope is now or ever')
    END
)"""
# Comments and string literals, blanked (same length) before the CTEs are looked for.
_COMMENT_OR_STRING = re.compile(r"--[^\n]*|'(?:[^']|'')*'")
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
    sql: str  # what runs, with the DuckDB variable audit_scope bound to `scope`
    path: Path
    # Where the views the check reads are named: `sql`, but in a file of both scopes without the other
    # scope's CTE (the runner creates only the views a run reads). Never run.
    reads_text: str

    @property
    def sql_file(self) -> str:
        """The file's path from the repository root (analytics/sql/audits/<name>.sql)."""
        return f"analytics/sql/audits/{self.path.name}"


def _parse(path: Path) -> tuple[Check, ...]:
    """The checks one file defines: one, or two for a file of both scopes."""
    header = read_header(path, _HEADER)
    fields = header.fields
    missing = [key for key in _SHARED_ONLY if not fields.get(key)]
    if missing:
        raise CheckDefinitionError(f"{path.name}: header lacks {', '.join(missing)}")
    if fields["audit"] != path.stem or not _NAME.match(path.stem):
        raise CheckDefinitionError(f"{path.name}: the audit name must equal the file name")
    scopes = _scopes(path, fields["scope"])
    scoped = [key for key, _ in header.lines if key and key.partition(".")[0] in _SCOPE_NAMES]
    if len(scopes) == 1:
        if scoped:
            raise CheckDefinitionError(f"{path.name}: a scope's own header lines need '-- scope: now, ever'")
        return (_check(path, header, scopes[0], name=path.stem, reads_text=header.text),)
    if any(key.partition(".")[2] in _SHARED_ONLY for key, _ in header.lines if key and "." in key):
        raise CheckDefinitionError(f"{path.name}: audit and scope are the file's, never one scope's")
    spans = _findings_spans(path, header.text)
    checks = []
    for scope in scopes:
        start, end = spans[Scope.EVER if scope is Scope.NOW else Scope.NOW]
        checks.append(
            _check(
                path,
                header,
                scope,
                name=path.stem if scope is Scope.NOW else f"{path.stem}_ever",
                reads_text=header.text[:start] + header.text[end:],
            )
        )
    return tuple(checks)


def _scopes(path: Path, declared: str) -> tuple[Scope, ...]:
    try:
        scopes = tuple(Scope(part.strip()) for part in declared.split(","))
    except ValueError:
        raise CheckDefinitionError(f"{path.name}: scope is 'now', 'ever' or 'now, ever'") from None
    if scopes not in ((Scope.NOW,), (Scope.EVER,), (Scope.NOW, Scope.EVER)):
        raise CheckDefinitionError(f"{path.name}: scope is 'now', 'ever' or 'now, ever'")
    return scopes


def _check(path: Path, header: SqlHeader, scope: Scope, *, name: str, reads_text: str) -> Check:
    """The check of `scope` in the file: each key its scope's own value, else the shared one."""
    own: dict[str, str] = {}
    description: list[str] = []
    for key, value in header.lines:
        if key is None or key == scope.value:
            description.append(value)
        elif key.startswith(f"{scope.value}."):
            own[key.partition(".")[2]] = value
    fields = {**header.fields, **own}
    missing = [key for key in ("title", "invariant", "remediation") if not fields.get(key)]
    if missing:
        raise CheckDefinitionError(f"{path.name}: header lacks {', '.join(missing)} ({scope.value})")
    time_column = fields.get("time") or None
    clock = _clock(path, time_column, fields.get("clock") or None)
    group_by = tuple(c.strip() for c in fields.get("group_by", "").split(",") if c.strip())
    pages = tuple(page.strip() for page in fields.get("docs", "").split(",") if page.strip())
    section = f"{CHECK_DOCS}#{name}"
    return Check(
        name=name,
        scope=scope,
        title=fields["title"],
        invariant=fields["invariant"],
        remediation=fields["remediation"],
        docs=(section, *(page for page in pages if page != section)),
        description=" ".join(part for part in description if part),
        group_by=group_by,
        time_column=time_column,
        clock=clock,
        sql=header.text,
        path=path,
        reads_text=reads_text,
    )


def _findings_spans(path: Path, text: str) -> dict[Scope, tuple[int, int]]:
    """Where each scope's CTE (`now_findings`, `ever_findings`) starts and ends in a file of both
    scopes, which must end with `SCOPE_SELECTOR`."""
    code = _COMMENT_OR_STRING.sub(lambda match: " " * len(match.group()), text)
    spans: dict[Scope, tuple[int, int]] = {}
    for scope in Scope:
        cte = f"{scope.value}_findings"
        found = list(re.finditer(rf"\b{cte}\s+AS\s*\(", code, re.IGNORECASE))
        if len(found) != 1:
            raise CheckDefinitionError(f"{path.name}: a file of both scopes defines the CTE {cte} once")
        depth = 0
        for index in range(found[0].end() - 1, len(code)):
            depth += {"(": 1, ")": -1}.get(code[index], 0)
            if depth == 0:
                spans[scope] = (found[0].start(), index + 1)
                break
        else:
            raise CheckDefinitionError(f"{path.name}: the CTE {cte} is never closed")
    tail = text[max(end for _, end in spans.values()) :]
    if tail.split() != SCOPE_SELECTOR.split():
        raise CheckDefinitionError(f"{path.name}: a file of both scopes ends with its scope selector")
    return spans


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
    return in_listing_order((c for p in definition_files(directory) for c in _parse(p)), CHECK_ORDER)


def load_checks(directory: Path = AUDIT_SQL_DIR) -> tuple[Check, ...]:
    """Every check defined in `directory`, in report order."""
    return _load(directory.resolve())

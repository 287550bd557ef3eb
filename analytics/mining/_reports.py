"""The mining reports: one SQL file each in analytics/sql/mining/, a SELECT returning the report's table,
with its metadata in a comment header:

    -- report: daily_activity                     the report's name (equal to the file's stem)
    -- title: Signups, cancellations, ... per day
    -- chart: stacked day -> signups, cancellations   optional: <line|stacked|bar|logbar> <x> -> <y columns>
    -- clock: business                            with a chart: the ONE clock its times are on (business,
                                                  stream, processor; none for a chart without time)
    -- Any other comment lines are the description.

Files whose names start with `_` are not reports: `_base.sql` defines the views they share.
"""

from __future__ import annotations

__all__ = ["MINING_SQL_DIR", "ChartSpec", "Report", "ReportDefinitionError", "load_reports"]

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from analytics._sql_files import definition_files, in_listing_order, read_header
from schema.errors import TerminalError

MINING_SQL_DIR = Path(__file__).resolve().parents[1] / "sql" / "mining"
REPORT_ORDER: tuple[str, ...] = (
    "active_over_time",
    "daily_activity",
    "reactivation_grace",
    "accounts_per_user",
    "cleanup_latency",
    "stale_account_rate",
)

_HEADER = re.compile(r"\A--\s?(report|title|chart|clock):\s*(.*?)\s*\Z")
CLOCKS: dict[str, str] = {
    "business": "business time",
    "stream": "stream time",
    "processor": "processor clock",
    "none": "",
}
_CHART = re.compile(r"\A(line|stacked|bar|logbar)\s+([a-z_][a-z0-9_]*)\s*->\s*([a-z0-9_,\s]+)\Z")


class ReportDefinitionError(TerminalError):
    """A mining SQL file whose header is missing or malformed."""


@dataclass(frozen=True, slots=True)
class ChartSpec:
    # line (series over x), stacked (stacked bars over x), bar (horizontal bars per x), logbar (the same
    # on a log scale)
    kind: str
    x: str
    y: tuple[str, ...]
    clock: str = "none"  # the one clock every time in the chart is on (CLOCKS)

    @property
    def clock_label(self) -> str:
        """How the chart names its clock ("business time"), empty for a chart without time."""
        return CLOCKS[self.clock]


@dataclass(frozen=True, slots=True)
class Report:
    name: str
    title: str
    description: str
    chart: ChartSpec | None
    sql: str
    path: Path

    @property
    def sql_file(self) -> str:
        return f"analytics/sql/mining/{self.path.name}"


def _parse(path: Path) -> Report:
    header = read_header(path, _HEADER)
    fields = header.fields
    if fields.get("report") != path.stem or not fields.get("title"):
        raise ReportDefinitionError(f"{path.name}: the header names the report as the file and gives a title")
    chart: ChartSpec | None = None
    if "chart" in fields:
        match = _CHART.match(fields["chart"])
        if not match:
            raise ReportDefinitionError(f"{path.name}: chart is '<line|stacked|bar|logbar> <x> -> <y>, ...'")
        columns = tuple(c.strip() for c in match.group(3).split(",") if c.strip())
        clock = fields.get("clock", "")
        if clock not in CLOCKS:
            raise ReportDefinitionError(
                f"{path.name}: a chart names its one clock: '-- clock: {'|'.join(CLOCKS)}'"
            )
        chart = ChartSpec(kind=match.group(1), x=match.group(2), y=columns, clock=clock)
    return Report(
        name=path.stem,
        title=fields["title"],
        description=header.description,
        chart=chart,
        sql=header.text,
        path=path,
    )


@cache
def _load(directory: Path) -> tuple[Report, ...]:
    return in_listing_order((_parse(p) for p in definition_files(directory)), REPORT_ORDER)


def load_reports(directory: Path = MINING_SQL_DIR) -> tuple[Report, ...]:
    """Every report defined in `directory`, in listing order."""
    return _load(directory.resolve())

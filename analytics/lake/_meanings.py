"""What the lake's tables, views and columns mean, read from schema/lake.md (its one source).

Three tables of that page are read: "The tables' Delta metadata" (each Delta table's name and
description, written into its Delta metadata), the views table ("one row per", the views' COMMENTs)
and "Column meanings" (every column's meaning: the views' column COMMENTs and the Delta tables' column
comments). A `owner.column` row is that view's or table's own meaning, a bare name everyone's.
"""

from __future__ import annotations

__all__ = [
    "TableMeaning",
    "column_meaning",
    "column_meanings",
    "table_meaning",
    "table_meanings",
    "view_meanings",
]

from dataclasses import dataclass
from functools import cache
from importlib import resources

# The suffix of a business time's parsed twin (`<column>_ts`, analytics/lake/_schema.py).
TIME_TWIN_SUFFIX = "_ts"


@dataclass(frozen=True, slots=True)
class TableMeaning:
    """A Delta table's name (its Delta metadata `name`) and description."""

    name: str
    description: str


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


@cache
def _tables() -> tuple[dict[str, TableMeaning], dict[str, str], dict[str, str]]:
    """(lake table -> its Delta name and description, view -> COMMENT, column key -> meaning)."""
    text = (resources.files("schema") / "lake.md").read_text(encoding="utf-8")
    tables: dict[str, TableMeaning] = {}
    views: dict[str, str] = {}
    columns: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = _cells(line)
        if set(cells[0]) <= {"-", " "}:
            continue
        if cells[:3] == ["table", "Delta name", "description"]:
            current = "tables"
        elif cells[:2] == ["view", "one row per"]:
            current = "views"
        elif cells[:2] == ["column", "meaning"]:
            current = "columns"
        elif current == "tables" and len(cells) >= 3:
            tables[cells[0].strip("`")] = TableMeaning(cells[1].strip("`"), cells[2])
        elif current == "views" and len(cells) >= 2:
            names = [n.strip() for n in cells[0].split("/")]
            rows = [r.strip() for r in cells[1].split("/")] if len(names) > 1 else [cells[1]]
            for name, row in zip(names, rows if len(rows) == len(names) else rows * len(names), strict=False):
                views[name] = f"One row per {row}. Columns: schema/lake.md."
        elif current == "columns" and len(cells) >= 2:
            columns[cells[0].strip("`")] = cells[1]
    return tables, views, columns


def table_meanings() -> dict[str, TableMeaning]:
    """Every lake table (its folder under the root, e.g. `snapshots/state`) with its Delta name and
    description."""
    return dict(_tables()[0])


def table_meaning(table: str) -> TableMeaning:
    """The Delta name and description of the lake table `table`; KeyError when schema/lake.md has none."""
    return _tables()[0][table]


def view_meanings() -> dict[str, str]:
    """view -> its COMMENT ("One row per ...")."""
    return dict(_tables()[1])


def column_meanings() -> dict[str, str]:
    """column or `owner.column` -> its meaning, as the "Column meanings" table states it."""
    return dict(_tables()[2])


def column_meaning(owner: str, column: str) -> str | None:
    """The meaning of `column` in the view or Delta table named `owner`, None when schema/lake.md has
    none: its own row, else the bare name's; an `old_`/`new_` image column is its base column in the
    image before/after the change; a `<c>_ts` column is the business time `<c>` parsed."""
    columns = _tables()[2]
    for key in (f"{owner}.{column}", column):
        if key in columns:
            return columns[key]
    if column.endswith(TIME_TWIN_SUFFIX):
        base = column_meaning(owner, column.removesuffix(TIME_TWIN_SUFFIX))
        if base is not None:
            return f"{base}, parsed as a UTC timestamp (NULL when the text is not an ISO-8601 instant)"
    for prefix, image in (("old_", "before"), ("new_", "after")):
        base_name = column.removeprefix(prefix)
        if column.startswith(prefix) and base_name in columns:
            return f"in the item's image {image} the change: {columns[base_name]}"
    return None

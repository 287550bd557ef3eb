"""What the tests read of a lake's Delta tables: their current data files and row counts."""

from __future__ import annotations

from analytics.lake import Lake
from analytics.lake._delta import active_files, open_table


def data_files(lake: Lake, table: str) -> list[str]:
    """The current data files of `table`, lake-relative, sorted."""
    return [f"{table}/{path}" for path, _ in active_files(open_table(lake, table))]


def rows(lake: Lake, table: str) -> int:
    """The rows of `table`'s current version (0 before it exists)."""
    delta = open_table(lake, table)
    return 0 if delta is None else delta.to_pyarrow_dataset().count_rows()

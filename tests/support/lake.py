"""Reading the lake from a test that polls it: a lake with no commit yet reads as holding no rows (the
views raise `LakeMissing` there, as every read does, rather than creating the lake)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from analytics import LakeMissing, connect, lake_from_settings
from config import Settings


def query_lake(settings: Settings, sql: str, parameters: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    """The rows `sql` gives over the lake's views; none while the lake holds no commit yet."""
    try:
        con = connect(lake_from_settings(settings))
    except LakeMissing:
        return []
    with con:
        return con.execute(sql, list(parameters)).fetchall()

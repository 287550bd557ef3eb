"""DuckDB plumbing shared by the lake's Python code: a UTC connection that can read the lake, and safe
SQL literals for file lists."""

from __future__ import annotations

__all__ = ["arrow_table", "connect", "literal", "path_list"]

import os
import tempfile
from collections.abc import Iterable

import duckdb
import pyarrow as pa

from analytics.lake._filesystem import Lake

# The lake's own queries (snapshots, compaction) stay well inside a shared machine: DuckDB's default is
# 80% of RAM. Past this it spills to a temporary directory.
MEMORY_LIMIT = "4GB"


def connect(lake: Lake, *, memory_limit: str = MEMORY_LIMIT) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET memory_limit = {literal(memory_limit)}")
    con.execute(f"SET temp_directory = {literal(os.path.join(tempfile.gettempdir(), 'lake-duckdb-spill'))}")
    con.execute("SET preserve_insertion_order = false")
    lake.register(con)
    return con


def literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def path_list(lake: Lake, relatives: Iterable[str]) -> str:
    return "[" + ", ".join(literal(lake.uri_for(relative)) for relative in relatives) + "]"


def arrow_table(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    return con.sql(sql).to_arrow_table()

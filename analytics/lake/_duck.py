"""DuckDB plumbing shared by the lake's Python code: a UTC connection that can read the lake, safe SQL
literals for file lists, and the delta extension from its PyPI wheel (`duckdb-extension-delta`, built for
exactly the pinned DuckDB: DuckDB's own extension site is not reachable here)."""

from __future__ import annotations

__all__ = ["arrow_table", "connect", "delta_extension_path", "literal", "load_delta_extension", "path_list"]

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

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


def delta_extension_path() -> str:
    """The delta extension file the `duckdb-extension-delta` wheel ships for this DuckDB's version (the
    DuckDB CLI of the same version loads it too: `LOAD '<path>'`)."""
    import duckdb_extension_delta  # noqa: PLC0415  (only the readers that scan Delta need it)

    folder = Path(duckdb_extension_delta.__file__).parent / "extensions" / f"v{duckdb.__version__}"
    return str(folder / "delta.duckdb_extension")


def load_delta_extension(con: duckdb.DuckDBPyConnection) -> None:
    """LOAD the delta extension (`delta_scan('<table>')`) on `con`."""
    con.execute(f"LOAD {literal(delta_extension_path())}")


def literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def path_list(lake: Lake, relatives: Iterable[str]) -> str:
    return "[" + ", ".join(literal(lake.uri_for(relative)) for relative in relatives) + "]"


def arrow_table(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    return con.sql(sql).to_arrow_table()

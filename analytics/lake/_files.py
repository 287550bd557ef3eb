"""Files of the lake beside its Delta tables, and what DuckDB needs to read the tables.

- The lake's tables (`TABLES`) and the files of their current versions, as DuckDB reads them
  (`table_files`: the schema anchor first, then every active data file, by URI).
- The schema anchor: a zero-row Parquet file with a table's declared schema, written once per process to
  a private temporary folder (never into the lake), so that readers always see every current column
  (`union_by_name`) and never an empty file list. Partitioned tables' anchors sit under
  `event_date=1970-01-01/` so that Hive partition discovery sees one layout.
- Small whole files (the erasure mask): locally the project's atomic owner-only write, on S3 one PUT.
"""

from __future__ import annotations

__all__ = [
    "ANCHOR_DATE",
    "AUDIT_FAILURES_TABLE",
    "TABLES",
    "TableSpec",
    "anchor_file",
    "ensure_layout",
    "read_bytes",
    "table_files",
    "write_bytes_atomic",
]

import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from analytics.lake._delta import active_files, ensure_table
from analytics.lake._filesystem import Lake
from analytics.lake._schema import (
    AUDIT_FAILURES,
    AUDIT_FAILURES_SCHEMA,
    CHANGES,
    OUTCOMES,
    OUTCOMES_SCHEMA,
    PARTITION_COLUMN,
    STATE_DIR,
    AllowList,
    changes_schema,
    state_schema,
)
from schema._files import private_dir, write_private_file

ANCHOR_DATE = date(1970, 1, 1)
AS_OF_DIR = "snapshots/as_of"
_anchor_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    partition_by: tuple[str, ...]

    def schema(self, allow: AllowList) -> pa.Schema:
        """The table's declared columns (the partition column included)."""
        if self.name == CHANGES:
            base = changes_schema(allow)
        elif self.name == OUTCOMES:
            base = OUTCOMES_SCHEMA
        elif self.name == AUDIT_FAILURES:
            base = AUDIT_FAILURES_SCHEMA
        else:
            base = state_schema(allow)
            if self.name == STATE_DIR:
                base = base.append(pa.field("folded_version", pa.int64()))
            if self.name == AS_OF_DIR:
                base = base.append(pa.field("as_of", pa.timestamp("us", tz="UTC")))
        if self.partition_by:
            base = base.append(pa.field(PARTITION_COLUMN, pa.date32()))
        return base


TABLES: dict[str, TableSpec] = {
    CHANGES: TableSpec(CHANGES, (PARTITION_COLUMN,)),
    OUTCOMES: TableSpec(OUTCOMES, (PARTITION_COLUMN,)),
    STATE_DIR: TableSpec(STATE_DIR, ()),
    AS_OF_DIR: TableSpec(AS_OF_DIR, ()),
}

# The audits' stored failures: read by the views, written only by `audit --store-failures` (so not in
# TABLES: ensure_layout never creates it).
AUDIT_FAILURES_TABLE = TableSpec(AUDIT_FAILURES, ())


def ensure_layout(lake: Lake, allow: AllowList) -> dict[str, DeltaTable]:
    """Every table of the lake, created empty where missing."""
    return {
        name: ensure_table(lake, name, spec.schema(allow), spec.partition_by) for name, spec in TABLES.items()
    }


def anchor_file(spec: TableSpec, allow: AllowList) -> str:
    """A local zero-row Parquet file with the table's declared columns (the partition column as a Hive
    path segment), made once per process and schema."""
    schema = spec.schema(allow)
    if spec.partition_by:
        schema = schema.remove(schema.get_field_index(PARTITION_COLUMN))
    key = hashlib.sha256(f"{spec.name}|{schema}".encode()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"lake-anchors-{os.getuid()}", key)
    if spec.partition_by:
        folder = os.path.join(folder, f"{PARTITION_COLUMN}={ANCHOR_DATE.isoformat()}")
    path = os.path.join(folder, "_schema.parquet")
    with _anchor_lock:
        if not os.path.exists(path):
            private_dir(folder)
            sink = pa.BufferOutputStream()
            pq.write_table(schema.empty_table(), sink)
            write_private_file(path, sink.getvalue().to_pybytes())
    return path


def table_files(lake: Lake, name: str, table: DeltaTable | None, allow: AllowList) -> list[str]:
    """What DuckDB reads for a table's loaded version: the anchor, then each active data file's URI."""
    return [anchor_file(TABLES[name], allow), *(lake.uri_for(f"{name}/{p}") for p, _ in active_files(table))]


def write_bytes_atomic(lake: Lake, relative: str, payload: bytes) -> None:
    """Write a small whole file (the mask) atomically."""
    target = lake.path(relative)
    if not lake.is_local:
        with lake.fs.open_output_stream(target) as out:
            out.write(payload)
        return
    write_private_file(target, payload)


def read_bytes(lake: Lake, relative: str) -> bytes:
    with lake.fs.open_input_stream(lake.path(relative)) as handle:
        data: bytes = handle.read()
    return data

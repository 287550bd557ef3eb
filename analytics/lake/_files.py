"""Files of the lake beside its Delta tables, the tables' declared layout, and what DuckDB needs to
read the tables.

- The lake's tables (`TABLES`), each with its declared columns and, in its Delta metadata, its name,
  description and column comments (schema/lake.md, "The tables' Delta metadata"): `ensure_layout`
  creates the missing tables with them and brings existing tables to them (`describe_table`).
- The files of a table's current version (`table_files`: every active data file, by URI).
- The schema anchor: a zero-row Parquet file with a table's declared schema, written once per process to
  a private temporary folder (never into the lake), so that the Python views (`analytics.lake.views`) always
  see every current column (`union_by_name`) and never an empty file list. Partitioned tables' anchors
  sit under `event_date=1970-01-01/` so that Hive partition discovery sees one layout. Nothing printed
  for another process (`lake views`, `lake files`) names one.
- Small whole files (the erasure mask): locally the project's atomic owner-only write, on S3 one PUT.
"""

from __future__ import annotations

__all__ = [
    "ANCHOR_DATE",
    "AUDIT_FAILURES_TABLE",
    "TABLES",
    "TableSpec",
    "anchor_file",
    "describe_table",
    "ensure_layout",
    "read_bytes",
    "table_files",
    "write_bytes_atomic",
]

import hashlib
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, Field
from deltalake.exceptions import DeltaError

from analytics.lake._delta import active_files, ensure_table, open_table, restrict_commit
from analytics.lake._filesystem import Lake
from analytics.lake._meanings import TableMeaning, table_meaning
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
    with_comments,
)
from schema import private_dir, write_private_file

logger = logging.getLogger(__name__)

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

    @property
    def meaning(self) -> TableMeaning:
        """The table's Delta name and description (schema/lake.md)."""
        return table_meaning(self.name)

    def described_schema(self, allow: AllowList) -> pa.Schema:
        """The declared columns with their comments, as the table's Delta schema holds them."""
        return with_comments(self.schema(allow), self.meaning.name)


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
    """Every table of the lake, created empty where missing, each described (`describe_table`); the
    audits' stored failures are described when they exist (only `audit --store-failures` creates them)."""
    tables = {}
    for name, spec in TABLES.items():
        table = ensure_table(
            lake,
            name,
            spec.described_schema(allow),
            spec.partition_by,
            table_name=spec.meaning.name,
            description=spec.meaning.description,
        )
        tables[name] = describe_table(lake, spec, table, allow)
    failures = open_table(lake, AUDIT_FAILURES)
    if failures is not None:
        describe_table(lake, AUDIT_FAILURES_TABLE, failures, allow)
    return tables


_DESCRIBE_ATTEMPTS = 4


def describe_table(lake: Lake, spec: TableSpec, table: DeltaTable, allow: AllowList) -> DeltaTable:
    """Bring an existing table's Delta metadata to schema/lake.md's words: the declared columns it lacks
    are added (with their comments), then the name, the description and every column comment that
    differs are set, each a metadata commit; a table already described commits nothing. Writers opening
    an old lake at once may race: a step that loses to a concurrent commit is tried again on the newest
    version, and a table still not described after a few tries is left for the next opening (logged):
    its rows are not at stake, only its words. Returns the table at its newest version."""
    start = table.version()
    for attempt in range(_DESCRIBE_ATTEMPTS):
        try:
            changed = _describe(spec, table, allow)
        except DeltaError as error:
            logger.info(
                "table description lost to a concurrent commit",
                extra={"table": spec.name, "attempt": attempt, "error": type(error).__name__},
            )
            reopened = open_table(lake, spec.name)
            if reopened is None:
                return table
            table = reopened
            continue
        if changed:
            for version in range(start + 1, table.version() + 1):
                restrict_commit(lake, spec.name, version)
        return table
    logger.warning("table description left for the next opening", extra={"table": spec.name})
    return table


def _describe(spec: TableSpec, table: DeltaTable, allow: AllowList) -> bool:
    """The metadata commits that make `table` match `spec`'s words; whether any was made."""
    wanted = spec.described_schema(allow)
    meaning = spec.meaning
    changed = False
    present = {field.name: field for field in table.schema().fields}
    missing = [field for field in wanted if field.name not in present]
    if missing:
        table.alter.add_columns([Field.from_arrow(field) for field in missing])
        changed = True
    metadata = table.metadata()
    if metadata.name != meaning.name:
        table.alter.set_table_name(meaning.name)
        changed = True
    if metadata.description != meaning.description:
        table.alter.set_table_description(meaning.description)
        changed = True
    present = {field.name: field for field in table.schema().fields}
    for field in wanted:
        comment = (field.metadata or {}).get(b"comment")
        held = present.get(field.name)
        if comment is None or held is None:
            continue
        text = comment.decode()
        if held.metadata.get("comment") != text:
            table.alter.set_column_metadata(field.name, {**held.metadata, "comment": text})
            changed = True
    return changed


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


def table_files(lake: Lake, name: str, table: DeltaTable | None) -> list[str]:
    """Each active data file's URI in a table's loaded version (no anchor: a list for another process)."""
    return [lake.uri_for(f"{name}/{p}") for p, _ in active_files(table)]


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

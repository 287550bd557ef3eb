"""The lake's explicit Arrow schemas and its allow-list of item attributes.

Nothing here is inferred from data: every dataset's schema is declared, and the item columns come from
`schema/lake_allow_list.json` (the contract of which attributes may land). schema/lake.md documents them.
"""

from __future__ import annotations

__all__ = [
    "AUDIT_FAILURES",
    "AUDIT_FAILURES_SCHEMA",
    "CHANGES",
    "CHANGE_IDENTITY",
    "COMMENT_KEY",
    "LAKE_SCHEMA_VERSION",
    "NEVER_LAND",
    "OUTCOMES",
    "OUTCOMES_SCHEMA",
    "OUTCOME_IDENTITY",
    "PARTITION_COLUMN",
    "PORTABLE_PROTOCOL",
    "SNAPSHOTS",
    "STATE_DIR",
    "TIME_TWIN_SUFFIX",
    "AllowList",
    "AllowListError",
    "AttributeSpec",
    "PortableProtocol",
    "changes_schema",
    "default_allow_list",
    "image_columns",
    "load_allow_list",
    "parse_business_time",
    "state_schema",
    "with_comments",
]

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import pyarrow as pa

from analytics.lake._meanings import TIME_TWIN_SUFFIX, column_meaning
from schema.errors import TerminalError

LAKE_SCHEMA_VERSION = 1
CHANGES = "changes"
OUTCOMES = "outcomes"
# The failing rows `entitlements audit --store-failures` keeps (which rows: analytics/audits/_failures.py;
# the table: analytics/lake/audit_failures.py).
AUDIT_FAILURES = "audits/failures"
SNAPSHOTS = "snapshots"
STATE_DIR = f"{SNAPSHOTS}/state"
PARTITION_COLUMN = "event_date"
CHANGE_IDENTITY = ("stream_arn", "shard_id", "sequence_number")
OUTCOME_IDENTITY = ("outcome_id",)
# Attributes that never land, whatever the allow-list says (defence in depth for the processor token).
NEVER_LAND = frozenset({"processorToken"})

_TIMESTAMP = pa.timestamp("us", tz="UTC")
# A string attribute whose column ends so is a business time written as ISO-8601 text (createdAt,
# updatedAt): it lands as written and, beside it, parsed (`<column>_ts`, schema/lake.md).
_BUSINESS_TIME_SUFFIX = "_at"
COMMENT_KEY = b"comment"
_COLUMN_NAME = re.compile(r"\A[a-z][a-z0-9_]{0,62}\Z")
_SIMPLE_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
}

# Stream metadata of a change-log row, in file order. `sequence_key` is the sequence number left-padded
# to 48 digits (text order = numeric order); `sequence_number` is the raw string from the stream.
_CHANGE_META: tuple[pa.Field, ...] = (
    pa.field("schema_version", pa.int16(), nullable=False),
    pa.field("stream_arn", pa.string(), nullable=False),
    pa.field("shard_id", pa.string(), nullable=False),
    pa.field("sequence_number", pa.string(), nullable=False),
    pa.field("sequence_key", pa.string(), nullable=False),
    pa.field("event_id", pa.string(), nullable=False),
    pa.field("event_type", pa.string(), nullable=False),
    pa.field("change_kind", pa.string(), nullable=False),
    pa.field("created_at", _TIMESTAMP, nullable=False),
    pa.field("ttl_deletion", pa.bool_(), nullable=False),
    pa.field("pk", pa.string()),
    pa.field("sk", pa.string()),
    pa.field("item_kind", pa.string(), nullable=False),
    pa.field("user_id", pa.string()),
    pa.field("has_old_image", pa.bool_(), nullable=False),
    pa.field("has_new_image", pa.bool_(), nullable=False),
)

# The state of one item in a snapshot, after the image columns: which change produced it.
_STATE_META_HEAD: tuple[pa.Field, ...] = (
    pa.field("pk", pa.string()),
    pa.field("sk", pa.string()),
    pa.field("item_kind", pa.string(), nullable=False),
    pa.field("user_id", pa.string()),
)
_STATE_META_TAIL: tuple[pa.Field, ...] = (
    pa.field("deleted", pa.bool_(), nullable=False),
    pa.field("changed_at", _TIMESTAMP, nullable=False),
    pa.field("stream_arn", pa.string(), nullable=False),
    pa.field("shard_id", pa.string(), nullable=False),
    pa.field("sequence_number", pa.string(), nullable=False),
    pa.field("sequence_key", pa.string(), nullable=False),
    pa.field("event_id", pa.string(), nullable=False),
    pa.field("event_type", pa.string(), nullable=False),
    pa.field("change_kind", pa.string(), nullable=False),
)

OUTCOMES_SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int16(), nullable=False),
        pa.field("outcome_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("occurred_at", _TIMESTAMP, nullable=False),
        pa.field("user_id", pa.string()),
        pa.field("array_account_id", pa.string()),
        pa.field("source_event_id", pa.string()),
        pa.field("source_stream_arn", pa.string()),
        pa.field("source_shard_id", pa.string()),
        pa.field("source_sequence_number", pa.string()),
        pa.field("source_sequence_key", pa.string()),
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("detail", pa.string()),
    ],
    metadata={"lake.dataset": OUTCOMES, "lake.schema_version": str(LAKE_SCHEMA_VERSION)},
)

# One stored finding of a failing check: whose it is, beside the finding as JSON
# (the table: analytics/lake/audit_failures.py; which findings become rows: analytics/audits/_failures.py).
AUDIT_FAILURES_SCHEMA = pa.schema(
    [
        pa.field("audit_id", pa.string(), nullable=False),
        pa.field("audited_at", _TIMESTAMP, nullable=False),
        pa.field("as_of", _TIMESTAMP),
        pa.field("check_name", pa.string(), nullable=False),
        pa.field("scope", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("row_number", pa.int64(), nullable=False),
        pa.field("user_id", pa.string()),
        pa.field("other_user_id", pa.string()),
        pa.field("pk", pa.string()),
        pa.field("row", pa.string(), nullable=False),
    ]
)

_RESERVED = frozenset(f.name for f in (*_CHANGE_META, *_STATE_META_TAIL)) | {PARTITION_COLUMN, "filename"}


class AllowListError(TerminalError):
    """The allow-list is malformed or names an attribute that must never land."""


@dataclass(frozen=True, slots=True)
class AttributeSpec:
    """One allowed item attribute: its DynamoDB name, its column name and its declared type."""

    attribute: str
    column: str
    type: str

    def fields(self) -> tuple[pa.Field, ...]:
        """The unprefixed columns this attribute becomes."""
        if self.type == "ttl":
            return (
                pa.field(self.column, pa.int64()),
                pa.field(f"{self.column}_raw", pa.string()),
                pa.field(f"{self.column}_type", pa.string()),
            )
        if self.is_business_time:
            return (pa.field(self.column, pa.string()), pa.field(self.time_twin, _TIMESTAMP))
        return (pa.field(self.column, _SIMPLE_TYPES[self.type]),)

    @property
    def is_business_time(self) -> bool:
        """A string attribute named as a time (`..._at`): ISO-8601 text the service wrote."""
        return self.type == "string" and self.column.endswith(_BUSINESS_TIME_SUFFIX)

    @property
    def time_twin(self) -> str:
        """The column holding a business time parsed to a UTC timestamp."""
        return f"{self.column}{TIME_TWIN_SUFFIX}"


@dataclass(frozen=True, slots=True)
class AllowList:
    version: int
    attributes: tuple[AttributeSpec, ...]
    never: frozenset[str]

    @property
    def attribute_names(self) -> frozenset[str]:
        return frozenset(spec.attribute for spec in self.attributes)


def _parse_allow_list(document: Any) -> AllowList:
    if not isinstance(document, dict) or not isinstance(document.get("attributes"), list):
        raise AllowListError("the lake allow-list must be an object with an `attributes` list")
    never = frozenset(str(name) for name in document.get("never", [])) | NEVER_LAND
    specs: list[AttributeSpec] = []
    columns: set[str] = set()
    for entry in document["attributes"]:
        if not isinstance(entry, dict):
            raise AllowListError("each allow-list attribute must be an object")
        spec = AttributeSpec(str(entry["attribute"]), str(entry["column"]), str(entry["type"]))
        if spec.attribute in never:
            raise AllowListError("the allow-list names an attribute that must never land")
        if spec.type != "ttl" and spec.type not in _SIMPLE_TYPES:
            raise AllowListError(f"unknown allow-list type {spec.type!r}")
        names = [f.name for f in spec.fields()]
        for name in names:
            if not _COLUMN_NAME.match(name) or name in _RESERVED or name in columns:
                raise AllowListError(f"allow-list column {name!r} is invalid or taken")
            columns.add(name)
        specs.append(spec)
    return AllowList(version=int(document.get("version", 1)), attributes=tuple(specs), never=never)


def load_allow_list(path: str | Path | None = None) -> AllowList:
    """Read an allow-list; by default the contract shipped in `schema/lake_allow_list.json`."""
    if path is None:
        text = resources.files("schema").joinpath("lake_allow_list.json").read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    return _parse_allow_list(json.loads(text))


@cache
def default_allow_list() -> AllowList:
    return load_allow_list()


def image_columns(allow: AllowList) -> tuple[pa.Field, ...]:
    """The unprefixed item columns, in order (old_<name>/new_<name> in the log, <name> in snapshots)."""
    return tuple(field for spec in allow.attributes for field in spec.fields())


def _metadata(dataset: str, allow: AllowList) -> dict[str, str]:
    return {
        "lake.dataset": dataset,
        "lake.schema_version": str(LAKE_SCHEMA_VERSION),
        "lake.allow_list_version": str(allow.version),
    }


def changes_schema(allow: AllowList) -> pa.Schema:
    """The change log: stream metadata, then every old_ image column, then every new_ one."""
    image = image_columns(allow)
    fields = [
        *_CHANGE_META,
        *(f.with_name(f"old_{f.name}") for f in image),
        *(f.with_name(f"new_{f.name}") for f in image),
    ]
    return pa.schema(fields, metadata=_metadata(CHANGES, allow))


def state_schema(allow: AllowList) -> pa.Schema:
    """A snapshot: one row per item (pk, sk), its latest image, and the change that produced it."""
    fields = [*_STATE_META_HEAD, *image_columns(allow), *_STATE_META_TAIL]
    return pa.schema(fields, metadata=_metadata(SNAPSHOTS, allow))


def parse_business_time(text: object) -> datetime | None:
    """An ISO-8601 instant as a UTC datetime; None for anything else (no text, no time of day, no
    offset: a local time names no instant, out of range). The text itself always lands as written."""
    if not isinstance(text, str) or "T" not in text.upper():
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None or moment.utcoffset() is None:
        return None
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def with_comments(schema: pa.Schema, owner: str) -> pa.Schema:
    """`schema` with each field's meaning (schema/lake.md, "Column meanings", for the view or Delta
    table `owner`) in its metadata under `comment`, which delta-rs writes into the Delta schema. Only a
    table's declared schema carries them, never the rows that land: delta-rs refuses an append whose
    field metadata differs from the table's, so words that change would stop every writer."""
    fields = []
    for field in schema:
        meaning = column_meaning(owner, field.name)
        metadata = dict(field.metadata or {})
        if meaning is not None:
            metadata[COMMENT_KEY] = meaning.encode()
        fields.append(field.with_metadata(metadata) if metadata else field)
    return pa.schema(fields, metadata=schema.metadata)


@dataclass(frozen=True, slots=True)
class PortableProtocol:
    """The Delta protocol every engine the lake promises reads: versions at most these, and table
    features only from these sets (none needed at these versions)."""

    max_reader_version: int
    max_writer_version: int
    reader_features: frozenset[str]
    writer_features: frozenset[str]


# What delta-rs (deltalake 1.6.6), DuckDB's delta extension (1.5.5, Delta Kernel), Polars (through
# delta-rs), Spark 3.5 with delta-spark 3.3, Trino's Delta Lake connector and Athena (engine v3) all
# read. Reader version 1 and writer version 2 (appendOnly, invariants) are the protocol every Delta
# reader has read since Delta 0.x; each engine reads more (reader 3 with features), but not the same
# more: Athena's list once stopped at Delta 2.0.2, Trino and Athena document reader features one by
# one, and DuckDB's extension reads what its Delta Kernel knows. So the lake stays at the common floor:
# no deletion vectors, no column mapping, no timestampNtz (times are timestamp with UTC, `timestamp` in
# Delta), no v2 checkpoints. Sources (schema/lake.md, "Table features"):
# - https://docs.delta.io/latest/versioning.html (features and the versions that need them)
# - https://github.com/delta-io/delta/blob/master/PROTOCOL.md (reader/writer versions, table features)
# - https://trino.io/docs/current/connector/delta-lake.html (reader 3 / writer 7, features listed)
# - https://docs.aws.amazon.com/athena/latest/ug/delta-lake-tables.html (reader up to version 3)
# - https://duckdb.org/docs/stable/core_extensions/delta (Delta Kernel based reader)
# - https://delta-io.github.io/delta-rs/ (delta-rs: the writer here; Polars reads through it)
PORTABLE_PROTOCOL = PortableProtocol(
    max_reader_version=1,
    max_writer_version=2,
    reader_features=frozenset(),
    writer_features=frozenset({"appendOnly", "invariants"}),
)

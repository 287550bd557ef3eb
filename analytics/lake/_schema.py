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
    "LAKE_SCHEMA_VERSION",
    "NEVER_LAND",
    "OUTCOMES",
    "OUTCOMES_SCHEMA",
    "OUTCOME_IDENTITY",
    "PARTITION_COLUMN",
    "SNAPSHOTS",
    "STATE_DIR",
    "AllowList",
    "AllowListError",
    "AttributeSpec",
    "changes_schema",
    "default_allow_list",
    "image_columns",
    "load_allow_list",
    "state_schema",
]

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import pyarrow as pa

from schema.errors import TerminalError

LAKE_SCHEMA_VERSION = 1
CHANGES = "changes"
OUTCOMES = "outcomes"
# The failing rows `entitlements audit --store-failures` keeps (analytics/audits/_failures.py).
AUDIT_FAILURES = "audits/failures"
SNAPSHOTS = "snapshots"
STATE_DIR = f"{SNAPSHOTS}/state"
PARTITION_COLUMN = "event_date"
CHANGE_IDENTITY = ("stream_arn", "shard_id", "sequence_number")
OUTCOME_IDENTITY = ("outcome_id",)
# Attributes that never land, whatever the allow-list says (defence in depth for the processor token).
NEVER_LAND = frozenset({"processorToken"})

_TIMESTAMP = pa.timestamp("us", tz="UTC")
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
# (analytics/audits/_failures.py).
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
        return (pa.field(self.column, _SIMPLE_TYPES[self.type]),)


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

"""Files of the lake: whole-file atomic writes, deterministic names, listings and the schema anchors.

A file is never visible half written. Locally it is written by the project's one atomic write
(`schema._files`: a hidden temporary file in the target directory, fsynced, renamed over the final name,
owner-only: files 0600, folders 0700, since the lake holds user ids). On S3 the complete file
is built in memory and sent in one request (a single PUT; pyarrow switches to a multipart upload above
its part size, which S3 also makes visible only when complete). Rewriting a name replaces it whole.
"""

from __future__ import annotations

__all__ = [
    "ANCHOR_DATE",
    "ANCHOR_NAME",
    "COMPACTED_FROM_KEY",
    "FileEntry",
    "anchor_path",
    "change_file_name",
    "delete_file",
    "digest",
    "ensure_layout",
    "list_files",
    "list_parquet",
    "outcome_file_name",
    "partition_dir",
    "read_bytes",
    "read_file_metadata",
    "read_schema",
    "read_table",
    "write_bytes_atomic",
    "write_parquet_atomic",
]

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from analytics.lake._filesystem import Lake
from analytics.lake._schema import (
    CHANGES,
    OUTCOMES,
    OUTCOMES_SCHEMA,
    PARTITION_COLUMN,
    STATE_DIR,
    AllowList,
    changes_schema,
    state_schema,
)
from schema._files import write_private, write_private_file

# Every dataset directory holds a zero-row file with the current schema, so that readers never meet an
# empty glob and union_by_name always sees every current column. It sits in a partition of its own.
ANCHOR_DATE = date(1970, 1, 1)
ANCHOR_NAME = "_schema.parquet"
# Parquet key-value metadata of a compacted file: the lineage of the files it replaced (JSON).
COMPACTED_FROM_KEY = b"lake.compacted_from"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
COMPRESSION = "zstd"
_DICTIONARY_COLUMNS = frozenset(
    {"stream_arn", "shard_id", "event_type", "item_kind", "status", "kind", "source_stream_arn", "detail"}
)


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A data file: its lake-relative path and size in bytes."""

    path: str
    size: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def directory(self) -> str:
        return self.path.rsplit("/", 1)[0] if "/" in self.path else ""


def digest(text: str, length: int = 16) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def partition_dir(dataset: str, day: date) -> str:
    return f"{dataset}/{PARTITION_COLUMN}={day.isoformat()}"


def change_file_name(stream_arn: str, shard_id: str, first_key: str, last_key: str) -> str:
    """Deterministic: the same range of one shard always gets the same name. The stream ARN enters as a
    digest (ARNs are long and a lake may hold several streams)."""
    shard = _UNSAFE.sub("_", shard_id)
    return f"{digest(stream_arn, 8)}_{shard}_{first_key}_{last_key}.parquet"


def outcome_file_name(outcome_ids: Iterable[str]) -> str:
    """Deterministic: named by a digest of the sorted tokens of the outcomes it holds (the landing passes
    `<outcome id>:<kind>`, so a replay's final outcome, same id and another kind, gets a file of its own)."""
    return f"outcomes_{digest('|'.join(sorted(outcome_ids)), 32)}.parquet"


def write_parquet_atomic(
    lake: Lake,
    relative: str,
    data: pa.Table | Iterable[pa.RecordBatch],
    schema: pa.Schema,
    *,
    metadata: Mapping[bytes, bytes] | None = None,
    row_group_size: int = 1_000_000,
) -> int:
    """Write a whole Parquet file (zstd) at `relative` atomically; returns the rows written."""
    if metadata:
        schema = schema.with_metadata({**(schema.metadata or {}), **metadata})
    target = lake.path(relative)
    if lake.is_local:
        return _write_local(target, data, schema, row_group_size)
    sink = pa.BufferOutputStream()
    rows = _write(sink, data, schema, row_group_size)
    payload = sink.getvalue()
    with lake.fs.open_output_stream(target) as out:
        out.write(payload)
    return rows


def _dictionary_columns(schema: pa.Schema) -> list[str]:
    """Low-cardinality text columns: dictionary-encoded (smaller, faster to write); the rest plain."""
    return [
        f.name
        for f in schema
        if pa.types.is_string(f.type)
        and (f.name in _DICTIONARY_COLUMNS or f.name.endswith(("_status", "_gsi1sk", "_ttl_type", "_kind")))
    ]


def _write(sink: object, data: pa.Table | Iterable[pa.RecordBatch], schema: pa.Schema, rgs: int) -> int:
    rows = 0
    with pq.ParquetWriter(
        sink, schema, compression=COMPRESSION, use_dictionary=_dictionary_columns(schema)
    ) as writer:
        if isinstance(data, pa.Table):
            writer.write_table(data.cast(schema) if data.schema != schema else data, row_group_size=rgs)
            rows = data.num_rows
        else:
            for batch in data:
                if batch.num_rows:
                    writer.write_batch(batch, row_group_size=rgs)
                    rows += batch.num_rows
    return rows


def _write_local(target: str, data: pa.Table | Iterable[pa.RecordBatch], schema: pa.Schema, rgs: int) -> int:
    return write_private(target, lambda handle: _write(handle, data, schema, rgs))


def write_bytes_atomic(lake: Lake, relative: str, payload: bytes) -> None:
    """Write a small whole file (a manifest) atomically."""
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


def list_files(lake: Lake, directory: str, suffix: str) -> list[FileEntry]:
    """Every file under a directory ending in `suffix`, hidden files excepted."""
    selector = pafs.FileSelector(lake.path(directory), recursive=True, allow_not_found=True)
    entries = [
        FileEntry(lake.relative(info.path), info.size or 0)
        for info in lake.fs.get_file_info(selector)
        if info.type == pafs.FileType.File
        and info.base_name.endswith(suffix)
        and not info.base_name.startswith(".")
    ]
    return sorted(entries, key=lambda entry: entry.path)


def list_parquet(lake: Lake, directory: str) -> list[FileEntry]:
    """Data files under a lake-relative directory, recursively, sorted by path. Hidden and underscore
    files (temporaries, schema anchors) are not data."""
    selector = pafs.FileSelector(lake.path(directory), recursive=True, allow_not_found=True)
    entries = [
        FileEntry(lake.relative(info.path), info.size or 0)
        for info in lake.fs.get_file_info(selector)
        if info.type == pafs.FileType.File
        and info.base_name.endswith(".parquet")
        and not info.base_name.startswith(("_", "."))
    ]
    return sorted(entries, key=lambda entry: entry.path)


def delete_file(lake: Lake, relative: str) -> bool:
    """Delete a file; False if it was already gone."""
    try:
        lake.fs.delete_file(lake.path(relative))
    except FileNotFoundError:
        return False
    return True


def read_file_metadata(lake: Lake, relative: str) -> dict[bytes, bytes]:
    with lake.fs.open_input_file(lake.path(relative)) as handle:
        return dict(pq.read_schema(handle).metadata or {})


def read_schema(lake: Lake, relative: str) -> pa.Schema:
    with lake.fs.open_input_file(lake.path(relative)) as handle:
        return pq.read_schema(handle)


def read_table(lake: Lake, relative: str, columns: list[str] | None = None) -> pa.Table:
    with lake.fs.open_input_file(lake.path(relative)) as handle:
        return pq.read_table(handle, columns=columns)


def anchor_path(directory: str) -> str:
    """The schema anchor of a dataset directory (snapshot state is not partitioned)."""
    if directory == STATE_DIR:
        return f"{directory}/{ANCHOR_NAME}"
    return f"{directory}/{PARTITION_COLUMN}={ANCHOR_DATE.isoformat()}/{ANCHOR_NAME}"


def ensure_layout(lake: Lake, allow: AllowList) -> None:
    """Write each dataset's schema anchor when it is missing or carries an older schema."""
    for directory, schema in (
        (CHANGES, changes_schema(allow)),
        (OUTCOMES, OUTCOMES_SCHEMA),
        (STATE_DIR, state_schema(allow)),
    ):
        relative = anchor_path(directory)
        try:
            with lake.fs.open_input_file(lake.path(relative)) as handle:
                if pq.read_schema(handle).equals(schema, check_metadata=True):
                    continue
        except (FileNotFoundError, OSError, pa.ArrowInvalid):
            pass
        write_parquet_atomic(lake, relative, schema.empty_table(), schema)

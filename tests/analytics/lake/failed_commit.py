"""A commit that fails between its data files and its log entry, for the erasure tests.

`failing_commits(monkeypatch, lake)` replaces the one function every append and rewrite of the lake
commits through (`write_deltalake`, as `analytics.lake._delta` calls it) with one that writes the
commit's Parquet files where delta-rs would (each partition's folder, delta-rs's file naming, zstd),
through the lake's own filesystem (local disk or S3), and then fails as a failing log write does: the
files stay, and no version of the table references them.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from analytics.lake import Lake
from analytics.lake import _delta as delta_module

INJECTED = "injected: the log entry could not be written"


def _folder(table: DeltaTable) -> str:
    """The table's folder as the lake's filesystem names it (a local path, or bucket/prefix)."""
    uri = str(table.table_uri).rstrip("/")
    for prefix in ("file://", "s3://"):
        if uri.startswith(prefix):
            uri = uri[len(prefix) :]
    return uri


def failing_commits(monkeypatch: pytest.MonkeyPatch, lake: Lake) -> list[str]:
    """From now on every commit writes its data files and fails; returns the list the written files'
    paths (as the lake's filesystem names them) are appended to."""
    written: list[str] = []

    def write_then_fail(table: DeltaTable, data: pa.Table, *, partition_by: Any = None, **_: Any) -> None:
        folder = _folder(table)
        columns = list(partition_by or [])
        groups: list[tuple[str, pa.Table]] = []
        if columns:
            (column,) = columns
            for day in pc.unique(data[column]).to_pylist():
                part = data.filter(pc.equal(data[column], day)).drop_columns([column])
                groups.append((f"{column}={day}/", part))
        else:
            groups.append(("", data))
        for number, (subfolder, part) in enumerate(groups):
            path = f"{folder}/{subfolder}part-{number:05d}-{uuid.uuid4()}-c000.zstd.parquet"
            lake.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            with lake.fs.open_output_stream(path) as out:
                pq.write_table(part, out, compression="zstd")
            written.append(path)
        raise OSError(INJECTED)

    monkeypatch.setattr(delta_module, "write_deltalake", write_then_fail)
    return written

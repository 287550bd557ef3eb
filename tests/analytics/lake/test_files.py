"""analytics/lake/_files.py: whole-file atomic writes and deterministic names."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.lake import Lake
from analytics.lake._files import (
    change_file_name,
    list_parquet,
    outcome_file_name,
    write_bytes_atomic,
    write_parquet_atomic,
)


def _batches(fail_after: int) -> Iterator[pa.RecordBatch]:
    for index in range(3):
        if index == fail_after:
            raise RuntimeError("the writer died")
        yield pa.record_batch({"a": [index]})


def test_a_write_that_dies_leaves_neither_the_file_nor_a_temporary(lake: Lake) -> None:
    schema = pa.schema([("a", pa.int64())])
    with pytest.raises(RuntimeError):
        write_parquet_atomic(lake, "changes/event_date=2026-01-01/x.parquet", _batches(2), schema)
    directory = os.path.join(lake.base, "changes/event_date=2026-01-01")
    assert os.listdir(directory) == []


def test_a_rewrite_replaces_the_whole_file(lake: Lake) -> None:
    schema = pa.schema([("a", pa.int64())])
    write_parquet_atomic(lake, "changes/event_date=2026-01-01/x.parquet", pa.table({"a": [1, 2]}), schema)
    write_parquet_atomic(lake, "changes/event_date=2026-01-01/x.parquet", pa.table({"a": [3]}), schema)
    assert pq.read_table(lake.path("changes/event_date=2026-01-01/x.parquet"))["a"].to_pylist() == [3]


def test_listing_skips_anchors_and_temporaries(lake: Lake) -> None:
    schema = pa.schema([("a", pa.int64())])
    for name in ("_schema.parquet", ".x.parquet.123.tmp", "data.parquet"):
        write_parquet_atomic(lake, f"changes/event_date=2026-01-01/{name}", schema.empty_table(), schema)
    assert [f.name for f in list_parquet(lake, "changes")] == ["data.parquet"]


def test_names_are_deterministic_and_safe() -> None:
    first = change_file_name("arn:a", "shard/1", "0" * 47 + "1", "0" * 46 + "99")
    assert first == change_file_name("arn:a", "shard/1", "0" * 47 + "1", "0" * 46 + "99")
    assert "/" not in first and first != change_file_name("arn:b", "shard/1", "0" * 47 + "1", "0" * 46 + "99")
    assert outcome_file_name(["b", "a"]) == outcome_file_name(["a", "b"])


def test_a_local_lake_file_is_owner_only_in_owner_only_folders(lake: Lake) -> None:
    schema = pa.schema([("a", pa.int64())])
    write_parquet_atomic(lake, "changes/event_date=2026-01-01/x.parquet", pa.table({"a": [1]}), schema)
    modes = [
        os.stat(lake.path(relative)).st_mode & 0o777
        for relative in (
            "changes/event_date=2026-01-01/x.parquet",
            "changes/event_date=2026-01-01",
            "changes",
            "",
        )
    ]
    assert modes == [0o600, 0o700, 0o700, 0o700]


def test_a_small_local_file_is_owner_only(lake: Lake) -> None:
    write_bytes_atomic(lake, "_snapshots/manifest.json", b"{}")
    assert os.stat(lake.path("_snapshots/manifest.json")).st_mode & 0o777 == 0o600

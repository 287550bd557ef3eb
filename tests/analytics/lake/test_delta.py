"""analytics/lake/_delta.py: a table's creation by concurrent first writers, and commits that survive an
erasure's clean-up of the log."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa

from analytics.lake import open_lake
from analytics.lake._delta import ensure_table, open_table
from tests.analytics.lake.delta_files import table_ids

SCHEMA = pa.schema([pa.field("n", pa.int64())])


def test_first_writers_creating_a_table_at_one_instant_make_one_table(tmp_path: Path) -> None:
    lake = open_lake(str(tmp_path / "lake"))
    writers = 6
    start = threading.Barrier(writers)
    versions: list[int] = []
    failures: list[BaseException] = []

    def create() -> None:
        start.wait()
        try:
            versions.append(ensure_table(lake, "t", SCHEMA).version())
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=create) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert versions == [0] * writers
    assert len(table_ids(lake, "t")) == 1
    table = open_table(lake, "t")
    assert table is not None and table.version() == 0

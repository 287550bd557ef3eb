"""What the tests read of a lake's Delta tables: their current data files, row counts and table ids."""

from __future__ import annotations

import json

import pyarrow.fs as pafs

from analytics.lake import Lake
from analytics.lake._delta import active_files, open_table


def data_files(lake: Lake, table: str) -> list[str]:
    """The current data files of `table`, lake-relative, sorted."""
    return [f"{table}/{path}" for path, _ in active_files(open_table(lake, table))]


def rows(lake: Lake, table: str) -> int:
    """The rows of `table`'s current version (0 before it exists)."""
    delta = open_table(lake, table)
    return 0 if delta is None else delta.to_pyarrow_dataset().count_rows()


def table_ids(lake: Lake, table: str) -> list[str]:
    """The table id of every `metaData` action in `table`'s log, in version order: one table has one id,
    and a log that holds two CREATE TABLE commits holds two."""
    folder = lake.path(f"{table}/_delta_log")
    selector = pafs.FileSelector(folder, allow_not_found=True)
    entries = sorted(i.path for i in lake.fs.get_file_info(selector) if i.path.endswith(".json"))
    ids: list[str] = []
    for path in entries:
        with lake.fs.open_input_stream(path) as handle:
            for line in handle.read().decode().splitlines():
                action = json.loads(line) if line.strip() else {}
                if "metaData" in action:
                    ids.append(str(action["metaData"]["id"]))
    return ids

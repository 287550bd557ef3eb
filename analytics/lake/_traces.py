"""Where a user still rests in one table of the lake: every file under the table's folder, read.

Not only the files the log names: a commit that failed after writing its Parquet files leaves files no
version references (delta-rs's lite vacuum never removes them), a rewrite's removed files stay until a
vacuum, and the log itself (JSON entries, checkpoints, a commit's temporary file) carries file statistics
and each DELETE's predicate. So a scan lists the folder and reads each file:

- a data file (`*.parquet` outside `_delta_log`): every string column, a cell equal to the user id or to
  their partition key (`USER#<id>`), and inside a cell holding JSON (the audits' stored finding) every
  string value the same way;
- a log file (`_delta_log/*.json`, `_last_checkpoint`, a commit's `*.tmp`): every line as JSON, each
  string equal to the id or its key, nested JSON (an add action's `stats`) parsed in turn; a commit's
  predicates (a DELETE's or a MERGE's SQL, under keys naming a predicate) are text, matched on the id
  bounded by characters that cannot be part of an id, so a short id never matches inside another id, a
  path or a number; a line that is not JSON is matched that way as bytes;
- a checkpoint (`_delta_log/*.checkpoint*.parquet`): every value of every row, as a log entry.

Matching whole values, never substrings, keeps `1` from matching `u001` or a row count. A file that
cannot be read raises (OSError, ArrowException): the caller answers "cannot tell", never "holds none";
a file deleted between the listing and its reading (a concurrent vacuum) is skipped: it holds nothing.
"""

from __future__ import annotations

__all__ = ["LOG_DIR", "TableTraces", "held_values", "scan_table", "table_files"]

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from analytics.lake._filesystem import Lake
from schema.table import USER_PK_PREFIX

LOG_DIR = "_delta_log"
# Characters an id may hold: a match must not be preceded or followed by one of them.
_ID_CHARS = "A-Za-z0-9_-"


@dataclass(frozen=True)
class TableTraces:
    """One table's scan for one user: how many files were read, and which hold the user (lake-relative
    paths: delta-rs names them by uuid, never by what they hold)."""

    table: str
    files_scanned: int
    files_holding: tuple[str, ...]

    @property
    def traces(self) -> int:
        return len(self.files_holding)


def held_values(user_id: str) -> frozenset[str]:
    """The whole values that name `user_id` in the lake: the id and the item key of their rows."""
    return frozenset({user_id, f"{USER_PK_PREFIX}{user_id}"})


def table_files(lake: Lake, name: str) -> list[pafs.FileInfo]:
    """Every file under the table's folder (data, removed, orphaned, log), sorted by path."""
    selector = pafs.FileSelector(lake.path(name), recursive=True, allow_not_found=True)
    return sorted(
        (info for info in lake.fs.get_file_info(selector) if info.type == pafs.FileType.File),
        key=lambda info: str(info.path),
    )


def scan_table(lake: Lake, name: str, user_id: str) -> TableTraces:
    """Read every file under table `name` for `user_id` (see the module's docstring)."""
    matcher = _Matcher(user_id)
    holding: list[str] = []
    files = table_files(lake, name)
    scanned = 0
    for info in files:
        relative = lake.relative(str(info.path))
        try:
            held = _file_holds(lake, info, relative, matcher)
        except OSError:
            # Deleted since the listing (a concurrent vacuum, compaction or purge): it holds nothing now.
            if lake.fs.get_file_info(str(info.path)).type == pafs.FileType.NotFound:
                continue
            raise
        scanned += 1
        if held:
            holding.append(relative)
    return TableTraces(name, scanned, tuple(holding))


def _file_holds(lake: Lake, info: pafs.FileInfo, relative: str, matcher: _Matcher) -> bool:
    in_log = f"/{LOG_DIR}/" in f"/{relative}"
    if in_log and info.base_name.endswith(".parquet"):
        return matcher.in_values(_checkpoint_rows(lake, str(info.path)))
    if in_log:
        return matcher.in_log_text(_read(lake, str(info.path)))
    if info.base_name.endswith(".parquet"):
        return _data_file_holds(lake, str(info.path), matcher)
    # No other kind of file belongs in a table's folder: matched as bytes, to be safe.
    return matcher.in_bytes(_read(lake, str(info.path)))


def _read(lake: Lake, path: str) -> bytes:
    with lake.fs.open_input_stream(path) as handle:
        data: bytes = handle.read()
    return data


def _checkpoint_rows(lake: Lake, path: str) -> list[dict[str, Any]]:
    with lake.fs.open_input_file(path) as handle:
        rows: list[dict[str, Any]] = pq.read_table(handle).to_pylist()
    return rows


def _data_file_holds(lake: Lake, path: str, matcher: _Matcher) -> bool:
    with lake.fs.open_input_file(path) as handle:
        schema = pq.read_schema(handle)
        text = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
        if not text:
            return False
        table = pq.read_table(handle, columns=text)
    wanted = pa.array(sorted(matcher.values), pa.string())
    for column in table.columns:
        values = column.cast(pa.string())
        if pc.any(pc.is_in(values, value_set=wanted)).as_py():
            return True
        json_like = pc.filter(values, pc.fill_null(pc.starts_with(values, "{"), False))
        if len(json_like) and matcher.in_values(_parsed(json_like.to_pylist())):
            return True
    return False


def _parsed(texts: Iterable[str]) -> Iterator[Any]:
    for text in texts:
        try:
            yield json.loads(text)
        except ValueError:
            yield text


class _Matcher:
    def __init__(self, user_id: str) -> None:
        self.values = held_values(user_id)
        self._bounded = re.compile(rf"(?<![{_ID_CHARS}]){re.escape(user_id)}(?![{_ID_CHARS}])")
        self._bounded_bytes = re.compile(self._bounded.pattern.encode())

    def in_bytes(self, data: bytes) -> bool:
        return self._bounded_bytes.search(data) is not None

    def in_log_text(self, data: bytes) -> bool:
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                action = json.loads(line)
            except ValueError:
                if self.in_bytes(line):
                    return True
                continue
            if self.in_values([action]):
                return True
        return False

    def in_values(self, values: Iterable[Any]) -> bool:
        return any(self._holds(value, sql=False) for value in values)

    def _holds(self, value: Any, *, sql: bool) -> bool:
        if isinstance(value, str):
            if value in self.values:
                return True
            if value and value[0] in "{[":
                try:
                    nested = json.loads(value)
                except ValueError:
                    nested = None
                if nested is not None:
                    return self._holds(nested, sql=False)
            # Only a predicate is SQL text naming ids inside it; any other text (a location, a mode) is
            # matched whole, so a short id never matches a path or a number in it.
            return sql and self._bounded.search(value) is not None
        if isinstance(value, dict):
            return any(
                self._holds(item, sql=isinstance(key, str) and "predicate" in key.lower())
                for key, item in value.items()
            )
        if isinstance(value, list | tuple):
            return any(self._holds(item, sql=sql) for item in value)
        return False

r"""Where a user still rests in one table of the lake: every file under the table's folder, read.

Not only the files the log names: a commit that failed after writing its Parquet files leaves files no
version references (delta-rs's lite vacuum never removes them), a rewrite's removed files stay until a
vacuum, and the log itself (JSON entries, checkpoints, a commit's temporary file) carries file statistics
and each DELETE's predicate. So a scan lists the folder and reads each file:

- a data file (`*.parquet` outside `_delta_log`): every text column (`string`, `large_string`, and the
  `string_view` delta-rs writes its DELETE's rewritten files with, dictionaries of them), a cell equal to
  the user id or to their partition key (`USER#<id>`), and inside a cell holding JSON (the audits'
  stored finding) every string value the same way; any other column not known to be textless (bytes,
  nested values) value by value, bytes read as UTF-8;
- a log file (`_delta_log/*.json`, `_last_checkpoint`, a commit's `*.tmp`): every line as JSON, each
  string equal to the id or its key, nested JSON (an add action's `stats`) parsed in turn; a commit's
  predicates (a DELETE's or a MERGE's SQL, under keys naming a predicate) are text, matched on the id
  bounded by characters that cannot be part of an id, so a short id never matches inside another id, a
  path or a number; a line that is not JSON is matched that way as bytes;
- a checkpoint (`_delta_log/*.checkpoint*.parquet`, a v2 checkpoint's sidecars): every value of every
  row, as a log entry.

A pre-filter saves most of that parsing: a log file, or a checkpoint's text and byte arrays, holding
none of the batch's ids as bytes, no `\u` escape and no NUL byte cannot hold any of them (each match
above holds an id's characters in a row, and a JSON writer can hide a plain printable ASCII character
only behind `\uXXXX`, or by writing UTF-16/32, which `json.loads` reads too), and is not parsed. A batch
with an id holding a character that has an escape of its own (`"`, `\`, `/`, control and non-ASCII
characters) is never ruled out this way. Data files are compressed: each is read.

Matching whole values, never substrings, keeps `1` from matching `u001` or a row count. A file that
cannot be read raises (OSError, ArrowException): the caller answers "cannot tell", never "holds none";
a file deleted between the listing and its reading (a concurrent vacuum) is skipped: it holds nothing.

One scan serves a batch of users (`scan_table_for`): each file is read once and matched against every
user's values at once; only a file that matches is asked, user by user, whose it is (a bounded match of
one id can sit inside another's), so the cost is per batch, not per user. A scan given `until` (a
`time.monotonic()` instant) raises `TimeoutError` once it passes, between two files: an erasure's
verifier must finish within its batch's time.
"""

from __future__ import annotations

__all__ = [
    "LOG_DIR",
    "BatchTraces",
    "TableTraces",
    "held_values",
    "scan_table",
    "scan_table_for",
    "table_files",
]

import json
import re
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
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
# Characters a JSON writer can only escape as `\uXXXX` (printable ASCII but the quote, the backslash and
# the slash, which have short escapes of their own): an id made of them is in a JSON text's bytes as it
# is, unless the text holds a `\u` escape (Go's writer escapes `<`, `>` and `&`; any writer may escape
# any character) or was written in UTF-16 or UTF-32 (which `json.loads` reads from bytes: NUL bytes).
_PLAIN = re.compile(r"[ !#-.0-\[\]-~]+")
_ESCAPE = b"\\u"
_WIDE = b"\x00"


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


@dataclass(frozen=True)
class BatchTraces:
    """One table's scan for a batch of users: how many files were read, and per user the files holding
    them (a user holding none is absent)."""

    table: str
    files_scanned: int
    holding: Mapping[str, tuple[str, ...]]

    def traces_of(self, user_id: str) -> int:
        return len(self.holding.get(user_id, ()))

    def of(self, user_id: str) -> TableTraces:
        return TableTraces(self.table, self.files_scanned, self.holding.get(user_id, ()))


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
    return scan_table_for(lake, name, (user_id,)).of(user_id)


def scan_table_for(
    lake: Lake, name: str, user_ids: Collection[str], *, until: float | None = None
) -> BatchTraces:
    """Read every file under table `name` once for all of `user_ids` (see the module's docstring);
    `TimeoutError` when `until` (a `time.monotonic()` instant) passes before the last file is read."""
    matcher = _Matcher(user_ids)
    holding: dict[str, list[str]] = {}
    files = table_files(lake, name) if matcher else []
    scanned = 0
    for info in files:
        if until is not None and time.monotonic() > until:
            raise TimeoutError("the lake scan ran out of its time")
        relative = lake.relative(str(info.path))
        try:
            owners = _file_holds(lake, info, relative, matcher)
        except OSError:
            # Deleted since the listing (a concurrent vacuum, compaction or purge): it holds nothing now.
            if lake.fs.get_file_info(str(info.path)).type == pafs.FileType.NotFound:
                continue
            raise
        scanned += 1
        for user_id in owners:
            holding.setdefault(user_id, []).append(relative)
    return BatchTraces(name, scanned, {user_id: tuple(paths) for user_id, paths in holding.items()})


def _file_holds(lake: Lake, info: pafs.FileInfo, relative: str, matcher: _Matcher) -> set[str]:
    in_log = f"/{LOG_DIR}/" in f"/{relative}"
    if in_log and info.base_name.endswith(".parquet"):
        checkpoint = _checkpoint(lake, str(info.path))
        if not matcher.may_be_in_arrays(_text_leaves(checkpoint)):
            return set()
        rows: list[dict[str, Any]] = checkpoint.to_pylist()
        return matcher.in_values(rows)
    if in_log:
        data = _read(lake, str(info.path))
        return matcher.in_log_text(data) if matcher.may_be_in_bytes(data) else set()
    if info.base_name.endswith(".parquet"):
        return _data_file_holds(lake, str(info.path), matcher)
    # No other kind of file belongs in a table's folder: matched as bytes, to be safe.
    return matcher.in_bytes(_read(lake, str(info.path)))


def _read(lake: Lake, path: str) -> bytes:
    with lake.fs.open_input_stream(path) as handle:
        data: bytes = handle.read()
    return data


def _checkpoint(lake: Lake, path: str) -> pa.Table:
    with lake.fs.open_input_file(path) as handle:
        return pq.read_table(handle)


def _text_leaves(table: pa.Table) -> Iterator[pa.Array | None]:
    """Every array of text or bytes inside `table`'s columns, through structs, lists, maps and
    dictionaries (a checkpoint's actions nest their paths, statistics and partition values), as `string`
    or `binary` (the types the compute kernels take); None for an array of a type this does not know
    to hold neither (its values cannot be ruled out)."""
    pending: list[pa.Array] = [chunk for column in table.columns for chunk in column.chunks]
    while pending:
        array = pending.pop()
        kind = array.type
        if _is_text(kind):
            yield array.cast(pa.string())
        elif _is_bytes(kind):
            yield array.cast(pa.binary())
        elif pa.types.is_struct(kind):
            pending.extend(array.field(index) for index in range(kind.num_fields))
        elif pa.types.is_map(kind):
            pending.extend((array.keys, array.items))
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
            pending.append(array.flatten())
        elif pa.types.is_dictionary(kind):
            pending.append(array.dictionary_decode())
        elif not _textless(kind):
            yield None


def _data_file_holds(lake: Lake, path: str, matcher: _Matcher) -> set[str]:
    """Every column that may hold text: text columns (`string`, `large_string`, `string_view`, which
    delta-rs's own rewrites write, and dictionaries of them) compared whole with the batch's values, a
    cell holding JSON parsed; any other column not known to be textless (bytes, nested) row by row. A
    text column whose footer statistics rule out every value of the batch (`_ruled_out`) is not read."""
    with lake.fs.open_input_file(path) as handle:
        parquet = pq.ParquetFile(handle)
        schema = parquet.schema_arrow
        flat = parquet.metadata.num_columns == len(schema)  # leaf i is field i
        columns = [
            field.name
            for index, field in enumerate(schema)
            if not _textless(field.type)
            and not (flat and matcher.plain and _ruled_out(parquet.metadata, index, matcher.values))
        ]
        if not columns:
            return set()
        table = parquet.read(columns=columns)
    owners: set[str] = set()
    chunks: list[pa.Array] = []
    for column in table.columns:
        kind = column.type
        if pa.types.is_dictionary(kind) and _is_text(kind.value_type):
            kind = kind.value_type
        if _is_text(kind):
            chunks.extend(column.cast(pa.string()).chunks)
        else:
            owners |= matcher.in_values(column.to_pylist())
    if not chunks:
        return owners
    # Every text column at once: a handful of kernel calls per file, not per column.
    values = pa.chunked_array(chunks, pa.string())
    wanted = pa.array(sorted(matcher.values), pa.string())
    for value in pc.unique(pc.filter(values, pc.is_in(values, value_set=wanted))).to_pylist():
        owners |= matcher.owners_of(value)
    json_like = pc.filter(values, pc.starts_with(values, "{"))  # a null is dropped, as a miss
    if len(json_like):
        owners |= matcher.in_values(_parsed(json_like.to_pylist()))
    return owners


def _ruled_out(metadata: pq.FileMetaData, column: int, values: Collection[str]) -> bool:
    """Whether every row group's statistics of text column `column` show that none of its cells equals
    one of `values` (plain ASCII) or starts with `{` (JSON, parsed): all null, or each value outside
    [min, max] and max below `{`. Only ASCII bounds are trusted: for ASCII strings every byte order a
    writer may have used (unsigned, as the format says, or the signed order of old writers) agrees,
    and a truncated bound is still a bound. Missing statistics rule nothing out."""
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        stats = row_group.column(column).statistics
        if stats is None:
            return False
        if stats.has_null_count and stats.null_count == row_group.num_rows:
            continue
        if not stats.has_min_max:
            return False
        low, high = stats.min, stats.max
        if not (isinstance(low, str) and isinstance(high, str) and low.isascii() and high.isascii()):
            return False
        if high >= "{" or any(low <= value <= high for value in values):
            return False
    return True


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind))


def _is_bytes(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_binary_view(kind)
        or pa.types.is_fixed_size_binary(kind)
    )


def _textless(kind: pa.DataType) -> bool:
    """Whether values of this Arrow type are never text nor bytes (`_Matcher._collect` matches those
    only)."""
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_temporal(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_null(kind)
    )


def _parsed(texts: Iterable[str]) -> Iterator[Any]:
    for text in texts:
        try:
            yield json.loads(text)
        except ValueError:
            yield text


def _bounded(ids: Iterable[str]) -> re.Pattern[str]:
    """The ids, each bounded by characters that cannot be part of an id (longest first)."""
    alternatives = "|".join(re.escape(user_id) for user_id in sorted(ids, key=len, reverse=True))
    return re.compile(rf"(?<![{_ID_CHARS}])(?:{alternatives})(?![{_ID_CHARS}])")


class _Matcher:
    """Every user's whole values at once; each answer is the set of users a file or value names."""

    def __init__(self, user_ids: Collection[str]) -> None:
        ids = sorted({user_id for user_id in user_ids if user_id})
        self._owners: dict[str, set[str]] = {}
        for user_id in ids:
            for value in held_values(user_id):
                self._owners.setdefault(value, set()).add(user_id)
        self.values = frozenset(self._owners)
        self._any = _bounded(ids) if ids else None
        self._each = {user_id: _bounded((user_id,)) for user_id in ids}
        self._needles = tuple(user_id.encode() for user_id in ids)
        self._escapable = not all(_PLAIN.fullmatch(user_id) for user_id in ids)
        # RE2 (the compute kernels' regex): each id quoted literally (a plain id holds no backslash,
        # so no `\E`), or an escape that may hide one.
        self._may_hide = "|".join([*(rf"\Q{user_id}\E" for user_id in ids), r"\\u"])

    def __bool__(self) -> bool:
        return self._any is not None

    @property
    def plain(self) -> bool:
        """Whether every id is plain printable ASCII (`_PLAIN`): what the pre-filters rely on."""
        return not self._escapable

    # Every match below (a whole value, a value inside nested JSON, a bounded id in a predicate or in
    # text) holds the id's own characters in a row in the decoded text; a file's bytes hold them too
    # unless a writer escaped one (`\uXXXX`: see `_PLAIN`) or wrote UTF-16/32. So a file holding
    # neither any id nor a `\u` nor a NUL byte holds none of them, and is not parsed (parsing every log
    # entry and checkpoint row was most of a batch's verification). A batch with an id that has a
    # character of its own escape (`"`, `\`, `/`, a control or non-ASCII character) is never ruled
    # out this way.
    def may_be_in_bytes(self, data: bytes) -> bool:
        if self._escapable or _ESCAPE in data or _WIDE in data:
            return True
        return any(needle in data for needle in self._needles)

    def may_be_in_arrays(self, arrays: Iterable[pa.Array | None]) -> bool:
        """`may_be_in_bytes` for a checkpoint's text and byte arrays (None: an array it cannot read)."""
        if self._escapable:
            return True
        for array in arrays:
            if array is None:
                return True
            if pc.any(pc.match_substring_regex(array, self._may_hide)).as_py():
                return True
        return False

    def owners_of(self, value: str) -> set[str]:
        return set(self._owners.get(value, ()))

    def _bounded_in(self, text: str) -> set[str]:
        # One search for the batch; only a text that holds some id is asked whose (a bounded match
        # of one id can hide another's: `x` inside `x.y`).
        if self._any is None or self._any.search(text) is None:
            return set()
        return {user_id for user_id, pattern in self._each.items() if pattern.search(text)}

    def in_bytes(self, data: bytes) -> set[str]:
        return self._bounded_in(data.decode("utf-8", "surrogateescape"))

    def in_log_text(self, data: bytes) -> set[str]:
        owners: set[str] = set()
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                action = json.loads(line)
            except ValueError:
                owners |= self.in_bytes(line)
                continue
            owners |= self.in_values([action])
        return owners

    def in_values(self, values: Iterable[Any]) -> set[str]:
        owners: set[str] = set()
        for value in values:
            self._collect(value, owners, sql=False)
        return owners

    def _collect(self, value: Any, owners: set[str], *, sql: bool) -> None:
        if isinstance(value, bytes):
            # A text column some writer left untyped (Parquet BYTE_ARRAY without its UTF8 annotation).
            value = value.decode("utf-8", "surrogateescape")
        if isinstance(value, str):
            owners |= self._owners.get(value, set())
            if value and value[0] in "{[":
                try:
                    nested = json.loads(value)
                except ValueError:
                    nested = None
                if nested is not None:
                    self._collect(nested, owners, sql=False)
                    return
            # Only a predicate is SQL text naming ids inside it; any other text (a location, a mode) is
            # matched whole, so a short id never matches a path or a number in it.
            if sql:
                owners |= self._bounded_in(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                self._collect(item, owners, sql=isinstance(key, str) and "predicate" in key.lower())
        elif isinstance(value, list | tuple):
            for item in value:
                self._collect(item, owners, sql=sql)

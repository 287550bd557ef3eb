"""The lake's SQL views on a DuckDB connection.

The views are defined in `analytics/sql/NN_name.sql`, one per file, run in order. The lake's tables are
Delta tables: here delta-rs resolves each table's current version to its data files, and DuckDB (its own
Parquet reader: no extension) reads those files, named in the variables `changes_files`, `outcomes_files`
and `state_files`. For the DuckDB CLI, `cli_script` (`entitlements lake views`) prints the same views
over `delta_scan` of each table instead (the delta extension), so a saved script reads each table as it
is at the query, from any folder or host, with the COMMENTs and the mask, naming no file outside the lake.
They read with `union_by_name` (files written under older schemas lose no column) and hide every user in
`erased_users`: the lake's erasure mask (`analytics/lake/_mask.py`), read on every connection, plus any
a caller adds. Every view and column carries a COMMENT from schema/lake.md ("Column meanings").

`entitlements sql` runs one SELECT of the views and nothing else (`read_only_statement` walks DuckDB's
parse tree: no table function, no file path as a table), on a connection `lock_down` then confines to
the lake's folder.

Reads only: no view creation writes to the lake, a lake with no data raises `LakeMissing`, and
`as_of` (stream time) shows every view as the log stood then (`NoDataAsOf` before its first change).

Views (columns in schema/lake.md):
- raw_changes, raw_outcomes: every landed row, replays included (lake health only)
- change_files, change_files_to_dedupe: the change files' ranges (from footers) and those that overlap
- changes, outcomes: one row per stream event / outcome, exactly once
- item_versions: every state of every item, with validity in stream time
- current_items: the latest image of every live item (from the log, or the snapshot: `from_snapshot`)
- entitlements, cleanup_records: the table now, by item kind
- entitlement_history, cleanup_record_history: item_versions by item kind
- users, array_accounts: one row per user / Array account
- snapshot_items: the table as of the last snapshot run
- audit_failures: the failing checks' rows `entitlements audit --store-failures` kept

Creating a view binds it, and binding reads the footers of every file under it: creating all sixteen
on a lake of a hundred files takes about 0.4 s. A caller that knows what it will query (an audit of one
check, a mining report) passes `views=` and gets those views and what they read, nothing else.
"""

from __future__ import annotations

__all__ = [
    "VIEW_NAMES",
    "LakeTablesOutdated",
    "cli_script",
    "column_comment",
    "comment_statements",
    "connect",
    "create_views",
    "duplicates_removed",
    "lock_down",
    "read_only_statement",
    "run_read_only",
    "set_mask",
    "sql_files",
    "variables_sql",
    "view_comments",
    "views_read_by",
    "write_database",
]

import json
import os
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from analytics.lake._delta import active_files, open_table, table_schema_names
from analytics.lake._duck import literal, load_delta_extension
from analytics.lake._errors import QueryFailed, QueryRefused
from analytics.lake._files import AUDIT_FAILURES_TABLE, TABLES, anchor_file, table_files
from analytics.lake._filesystem import Lake
from analytics.lake._fold import STATE_ORDER, fold_sql
from analytics.lake._mask import MASK_PATH, read_mask
from analytics.lake._meanings import column_meaning, column_meanings, view_meanings
from analytics.lake._read import require_as_of, require_data
from analytics.lake._schema import (
    AUDIT_FAILURES,
    CHANGES,
    OUTCOMES,
    PARTITION_COLUMN,
    STATE_DIR,
    AllowList,
    default_allow_list,
    state_schema,
)
from analytics.lake.snapshots import _unfolded, snapshot_info
from schema.errors import TerminalError

SQL_DIR = Path(__file__).parents[1] / "sql"
# The files `cli_script` writes differently: the mask (a view of the lake's mask file) and change_files.
MASK_FILE = "00_mask.sql"
CHANGE_FILES_FILE = "15_change_files.sql"
VIEW_NAMES: tuple[str, ...] = (
    "raw_changes",
    "raw_outcomes",
    "change_files",
    "change_files_to_dedupe",
    "changes",
    "outcomes",
    "item_versions",
    "current_items",
    "entitlements",
    "cleanup_records",
    "entitlement_history",
    "cleanup_record_history",
    "users",
    "array_accounts",
    "snapshot_items",
    "audit_failures",
)


def sql_files() -> list[Path]:
    """The view definitions in the order they must run."""
    return sorted(p for p in SQL_DIR.glob("[0-9][0-9]_*.sql"))


_VIEW_NAME_SET = frozenset(VIEW_NAMES)
# What a statement names, once its comments and string literals are blanked out.
_COMMENT_OR_STRING = re.compile(r"--[^\n]*|'(?:[^']|'')*'")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CREATES_VIEW = re.compile(r"CREATE\s+OR\s+REPLACE\s+VIEW\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)


def views_read_by(sql: str) -> frozenset[str]:
    """The lake's views that `sql` names (a superset: a column named like a view counts too)."""
    code = _COMMENT_OR_STRING.sub(" ", sql)
    return frozenset(name.lower() for name in _IDENTIFIER.findall(code)) & _VIEW_NAME_SET


@cache
def _definitions() -> tuple[tuple[frozenset[str], frozenset[str], str], ...]:
    """(the views a file creates, none for the mask's table; the views it reads; the file's text), in
    the files' order. Read and parsed once a process."""
    definitions = []
    for path in sql_files():
        text = path.read_text(encoding="utf-8")
        created = frozenset(name.lower() for name in _CREATES_VIEW.findall(_COMMENT_OR_STRING.sub(" ", text)))
        definitions.append((created, views_read_by(text) - created, text))
    return tuple(definitions)


def _with_dependencies(views: Iterable[str], replaced: dict[str, str]) -> set[str]:
    """`views` and every view they read, through the files (or the statements in `replaced`)."""
    reads = {
        name: views_read_by(replaced[name]) - {name} if name in replaced else file_reads
        for created, file_reads, _ in _definitions()
        for name in created
    }
    unknown = set(views) - set(reads)
    if unknown:
        raise ValueError(f"not views of the lake: {', '.join(sorted(unknown))}")
    wanted: set[str] = set()
    pending = list(views)
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            pending.extend(reads[name] - wanted)
    return wanted


def set_mask(con: Any, user_ids: Iterable[str]) -> None:
    """Replace the set of users every view hides."""
    con.execute("DELETE FROM erased_users")
    ids = sorted(set(user_ids))
    if ids:
        con.executemany("INSERT INTO erased_users VALUES (?)", [(user_id,) for user_id in ids])


def _read_files_sql(lake: Lake, anchor: str, relatives: list[str]) -> str:
    files = "[" + ", ".join([literal(anchor), *(literal(lake.uri_for(r)) for r in relatives)]) + "]"
    return f"read_parquet({files}, union_by_name = true, hive_partitioning = false)"


def _current_from_snapshot(lake: Lake, allow: AllowList) -> str | None:
    info = snapshot_info(lake)
    changes = open_table(lake, CHANGES)
    if info is None or changes is None:
        return None
    unfolded = _unfolded(lake, changes, info.folded_version)
    if unfolded is None:
        return None  # the log no longer reaches the snapshot (an erasure cleaned it): read the log
    to_read = unfolded[0]
    states = _read_files_sql(lake, anchor_file(TABLES[STATE_DIR], allow), list(info.state_files))
    columns = state_schema(allow).names
    live = ", ".join(c for c in columns if c != "deleted")
    # The mask as a plain anti join: written as a correlated NOT EXISTS, DuckDB plans a delim join that
    # buffers every row of the state and groups all its user ids before joining them with the mask
    # (same rows: a NULL user_id matches no mask entry in either form).
    mask = "ANTI JOIN erased_users AS e ON e.user_id = s.user_id"
    if info.deltas == 0 and not to_read:
        # One fold and nothing new: every item appears once, no dedupe needed.
        return (
            f"CREATE OR REPLACE VIEW current_items AS SELECT {live} FROM {states} AS s "  # noqa: S608
            f"{mask} WHERE NOT deleted"
        )
    changes_sql = _read_files_sql(lake, anchor_file(TABLES[CHANGES], allow), to_read)
    listed = ", ".join(columns)
    return (
        f"CREATE OR REPLACE VIEW current_items AS SELECT {live} FROM ("  # noqa: S608
        f"SELECT * FROM (SELECT {listed} FROM {states} UNION ALL BY NAME "
        f"{fold_sql(changes_sql, allow)}) AS s "
        f"{mask} QUALIFY row_number() OVER (PARTITION BY pk, sk ORDER BY {STATE_ORDER}) = 1"
        ") WHERE NOT deleted"
    )


def _partition_day(path: str) -> str | None:
    """The `event_date` partition of a table-relative data file's path (None when unpartitioned)."""
    head = path.split("/", 1)[0]
    prefix = f"{PARTITION_COLUMN}="
    return head[len(prefix) :] if head.startswith(prefix) else None


def _file_variables(lake: Lake, allow: AllowList, as_of: datetime | None = None) -> dict[str, list[str]]:
    """The DuckDB variables naming each table's current files (a schema anchor first). Reads only:
    raises `LakeMissing` when the lake holds no data (and `NoDataAsOf` before its first change). With
    `as_of`, the change files of later days are left out (their rows are all later) and the state
    files too (the views fold the log up to the instant). The audits' stored failures (`audits/failures`,
    written only by `audit --store-failures`) are read when the table exists: the anchor alone otherwise."""
    changes = require_data(lake) if as_of is None else require_as_of(lake, as_of)
    tables = {CHANGES: changes, OUTCOMES: open_table(lake, OUTCOMES), STATE_DIR: open_table(lake, STATE_DIR)}
    day = None if as_of is None else as_of.astimezone(UTC).date().isoformat()
    variables: dict[str, list[str]] = {}
    for variable, name in (("changes", CHANGES), ("outcomes", OUTCOMES), ("state", STATE_DIR)):
        paths = [p for p, _ in active_files(tables[name])]
        if day is not None and name == CHANGES:
            paths = [p for p in paths if (_partition_day(p) or day) <= day]
        elif day is not None and name == STATE_DIR:
            paths = []
        variables[f"{variable}_files"] = [
            anchor_file(TABLES[name], allow),
            *(lake.uri_for(f"{name}/{p}") for p in paths),
        ]
    failures = active_files(open_table(lake, AUDIT_FAILURES))
    variables["audit_failures_files"] = [
        anchor_file(AUDIT_FAILURES_TABLE, allow),
        *(lake.uri_for(f"{AUDIT_FAILURES}/{p}") for p, _ in failures),
    ]
    return variables


def _as_of_statements(as_of: datetime) -> dict[str, str]:
    """The views that restrict every other view to the log up to `as_of` (stream creation time): change
    rows created by then; outcomes answering one of those changes, or answering none and occurred by
    then (an outcome's time is the processor's clock, another axis); snapshot_items is the state then;
    audit_failures the rows of the audits run by then (audited_at)."""
    instant = f"TIMESTAMPTZ {literal(as_of.astimezone(UTC).isoformat())}"
    texts = {name: text for created, _, text in _definitions() for name in created}

    def restricted(name: str, condition: str) -> str:
        body = texts[name].rstrip()
        if not body.endswith(";"):
            raise ValueError(f"the view {name} must end with one statement's ';'")
        return f"{body[:-1]}\n    AND ({condition});"

    return {
        "raw_changes": restricted("raw_changes", f"c.created_at <= {instant}"),
        "raw_outcomes": restricted(
            "raw_outcomes",
            f"(o.source_event_id IS NULL AND o.occurred_at <= {instant}) "  # noqa: S608
            "OR o.source_event_id IN (SELECT event_id FROM raw_changes)",
        ),
        "snapshot_items": "CREATE OR REPLACE VIEW snapshot_items AS SELECT * FROM current_items",
        "audit_failures": restricted("audit_failures", f"f.audited_at <= {instant}"),
    }


def variables_sql(lake: Lake, allow_list: AllowList | None = None) -> str:
    """SET VARIABLE statements naming each table's current data files (`changes_files`,
    `outcomes_files`, `state_files`, `audit_failures_files`; an empty list for a table with no file),
    for a DuckDB session that reads them itself (`read_parquet(getvariable('changes_files'),
    union_by_name = true)`). They name files of the lake only (no schema anchor), as of now: a later
    commit or compaction changes the list. Raises `LakeMissing` on a lake with no data."""
    del allow_list  # the files are the log's; kept for callers that pass one
    require_data(lake)
    lines = []
    for variable, name in _VARIABLE_TABLES.items():
        files = table_files(lake, name, open_table(lake, name))
        lines.append(f"SET VARIABLE {variable} = {path_list_literal(files)};")
    return "\n".join(lines)


def path_list_literal(files: list[str]) -> str:
    return "[" + ", ".join(literal(f) for f in files) + "]"


def create_views(
    con: Any,
    lake: Lake,
    *,
    mask: Iterable[str] = (),
    from_snapshot: bool = False,
    allow_list: AllowList | None = None,
    views: Iterable[str] | None = None,
    as_of: datetime | None = None,
) -> None:
    """Create the views on `con` for `lake` (every one, or those named in `views` and what they read),
    hiding every user an erasure has masked in the lake (always: no caller can forget it) and the users
    in `mask`. Reads only: nothing is written to the lake, and a lake with no data raises `LakeMissing`.

    The views read the tables' versions current now: call again to see commits made since. With
    `from_snapshot`, `current_items` (and the views on it) reads the latest snapshot plus the change
    files committed after it. With `as_of` (stream creation time), every view shows the lake as its log
    stood then (`from_snapshot` does not apply); an instant before the first change raises `NoDataAsOf`.
    """
    allow = allow_list or default_allow_list()
    variables = _file_variables(lake, allow, as_of)
    replaced: dict[str, str] = {}
    if as_of is not None:
        replaced.update(_as_of_statements(as_of))
    elif from_snapshot and (statement := _current_from_snapshot(lake, allow)):
        replaced["current_items"] = statement
    wanted = None if views is None else _with_dependencies(views, replaced)
    lake.register(con)
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET VARIABLE lake_root = {literal(lake.uri)}")
    for name, files in variables.items():
        con.execute(f"SET VARIABLE {name} = {path_list_literal(files)}")
    made: set[str] = set()
    for created, _, text in _definitions():
        if created and wanted is not None and not created & wanted:
            continue
        con.execute(next((replaced[name] for name in created if name in replaced), text))
        made |= created
    for statement in comment_statements(con, made):
        con.execute(statement)
    set_mask(con, read_mask(lake) | frozenset(mask))


def view_comments() -> tuple[dict[str, str], dict[str, str]]:
    """(view -> its COMMENT, column or `view.column` -> its COMMENT), read from schema/lake.md: the
    views table ("one row per") and the "Column meanings" table (`analytics/lake/_meanings.py`)."""
    return view_meanings(), column_meanings()


def column_comment(view: str, column: str) -> str | None:
    """The COMMENT of `view.column` (schema/lake.md), None when the file has none."""
    return column_meaning(view, column)


def comment_statements(con: Any, views: Iterable[str]) -> list[str]:
    """COMMENT ON VIEW / COLUMN statements for `views` as created on `con` (their columns as bound)."""
    wanted = sorted(set(views))
    if not wanted:
        return []
    view_texts, _ = view_comments()
    rows = con.execute(
        "SELECT table_name, column_name FROM duckdb_columns() WHERE table_name IN "  # noqa: S608
        f"({', '.join(literal(v) for v in wanted)}) ORDER BY table_name, column_index"
    ).fetchall()
    statements = [f"COMMENT ON VIEW {v} IS {literal(view_texts[v])};" for v in wanted if v in view_texts]
    for view, column in rows:
        comment = column_comment(str(view), str(column))
        if comment is not None:
            statements.append(f'COMMENT ON COLUMN {view}."{column}" IS {literal(comment)};')
    return statements


# The variable each view's `read_parquet(getvariable(...))` reads, and the Delta table behind it.
_VARIABLE_TABLES = {
    "changes_files": CHANGES,
    "outcomes_files": OUTCOMES,
    "state_files": STATE_DIR,
    "audit_failures_files": AUDIT_FAILURES,
}
_READ_VARIABLE = re.compile(r"read_parquet\(\s*getvariable\('([a-z_]+)'\)")
_CHANGE_FILES_TO_DEDUPE = "CREATE OR REPLACE VIEW change_files_to_dedupe"


def _call_end(text: str, start: int) -> int:
    """The index just past the parenthesis closing the call whose `(` is the first after `start`."""
    depth = 0
    for index in range(text.index("(", start), len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index + 1
    raise ValueError("unbalanced parentheses in a view's file")


# What a view reads for one table: (without, with) the `filename` column.
_Source = tuple[str, str]


def _over_delta(text: str, sources: dict[str, _Source]) -> str:
    """`text` with each `read_parquet(getvariable('X_files'), ...)` call replaced by `sources[X_files]`
    (its second form where the call asks for `filename = true`)."""
    out, position = [], 0
    for match in _READ_VARIABLE.finditer(text):
        if match.start() < position:
            continue
        end = _call_end(text, match.start())
        call = text[match.start() : end]
        plain, with_filename = sources[match.group(1)]
        source = with_filename if re.search(r"filename\s*=\s*true", call) else plain
        out.extend([text[position : match.start()], source])
        position = end
    out.append(text[position:])
    return "".join(out)


def _change_files_over_delta(source: _Source) -> str:
    """change_files over the Delta table: the same columns as the footer-based view, computed from the
    rows (the CLI cannot list the log's files; the ranges and counts a footer holds are the rows')."""
    return (
        "CREATE OR REPLACE VIEW change_files AS\n"
        "SELECT filename, count(*) AS rows, min(sequence_key) AS first_key, max(sequence_key) AS last_key,\n"
        "    min(shard_id) AS first_shard, max(shard_id) AS last_shard,\n"
        "    min(stream_arn) AS first_stream, max(stream_arn) AS last_stream\n"
        f"FROM {source[1]}\nGROUP BY filename;\n\n"
    )


def _mask_view(lake: Lake) -> str:
    """erased_users as a view of the lake's erasure mask file, read on every query: a user masked after
    the script was printed is hidden too. A glob matching no file reads no row (no erasure yet)."""
    mask = lake.uri_for(MASK_PATH)
    return (
        "CREATE OR REPLACE VIEW erased_users AS\n"
        "SELECT CAST(unnest(CAST(json_extract(content, '$.user_ids') AS VARCHAR[])) AS VARCHAR) AS user_id\n"
        f"FROM read_text({literal(mask + '*')})\nWHERE filename = {literal(mask)};\n"
        "COMMENT ON VIEW erased_users IS 'The users an erasure is removing: every view hides their rows.';\n"
        "COMMENT ON COLUMN erased_users.user_id IS 'A user id in the erasure mask (_erasure/mask.json).';"
    )


def _declared(name: str, allow: AllowList) -> pa.Schema:
    spec = AUDIT_FAILURES_TABLE if name == AUDIT_FAILURES else TABLES[name]
    return spec.schema(allow)


def _empty_relation(schema: pa.Schema, con: Any) -> str:
    """A zero-row relation with `schema`'s columns in DuckDB's types (a table with no commit yet)."""
    relation = con.from_arrow(schema.empty_table())
    listed = ", ".join(
        f'CAST(NULL AS {kind}) AS "{name}"'
        for name, kind in zip(relation.columns, relation.types, strict=True)
    )
    return f"(SELECT {listed} WHERE false)"


def _delta_sources(lake: Lake, allow: AllowList, con: Any) -> tuple[dict[str, _Source], dict[str, _Source]]:
    """(what the script reads for each variable: `delta_scan` of its table, or a zero-row relation for a
    table with no commit yet; the same over zero-row stand-ins of the declared columns, to bind the
    views and read their columns without reading the lake). Raises `LakeTablesOutdated` when a table
    lacks declared columns (made before them and not opened by a writer since)."""
    scans: dict[str, _Source] = {}
    stand_ins: dict[str, _Source] = {}
    for variable, name in _VARIABLE_TABLES.items():
        schema = _declared(name, allow)
        empty = _empty_relation(schema, con)
        stand_in = (empty, f"(SELECT *, CAST('' AS VARCHAR) AS filename FROM {empty})")  # noqa: S608
        stand_ins[variable] = stand_in
        table = open_table(lake, name)
        if table is None:
            scans[variable] = stand_in
            continue
        lacking = set(schema.names) - set(table_schema_names(table))
        if lacking:
            raise LakeTablesOutdated(
                f"the lake's table {name} at {lake.uri} predates {len(lacking)} of the columns the views "
                "read: run `entitlements compact` once (a writer adds them), then make the views again"
            )
        uri = literal(lake.table_uri(name))
        scans[variable] = (f"delta_scan({uri})", f"delta_scan({uri}, filename = true)")
    return scans, stand_ins


class LakeTablesOutdated(TerminalError):
    """A lake table lacks columns its declared schema has (made before them, no writer opened it since)."""


def _view_texts(lake: Lake, sources: dict[str, _Source]) -> list[str]:
    """Every view file's statements with each table read through `sources`, and the mask as a view of
    the lake's mask file."""
    texts = []
    for path in sql_files():
        text = path.read_text(encoding="utf-8").strip()
        if path.name == MASK_FILE:
            texts.append(_mask_view(lake))
            continue
        if path.name == CHANGE_FILES_FILE:
            text = (
                _change_files_over_delta(sources["changes_files"])
                + text[text.index(_CHANGE_FILES_TO_DEDUPE) :]
            )
        texts.append(_over_delta(text, sources))
    return texts


def _view_statements(lake: Lake, allow: AllowList) -> tuple[list[str], list[str]]:
    """(the views' statements over `delta_scan`, their COMMENT statements), made on a connection that
    reads nothing: the views are bound over zero-row stand-ins of the declared columns."""
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        con.execute("SET TimeZone = 'UTC'")
        scans, stand_ins = _delta_sources(lake, allow, con)
        for text in _view_texts(lake, stand_ins):
            con.execute(text)
        comments = comment_statements(con, VIEW_NAMES)
    finally:
        con.close()
    return _view_texts(lake, scans), comments


def _script_head(lake: Lake) -> list[str]:
    return [
        f"-- The lake's views over the Delta tables at {lake.uri} (entitlements lake views). Each query",
        "-- reads the tables as they are then. Columns and time axes: schema/lake.md (and the COMMENTs:",
        "-- duckdb_columns()). Needs the delta extension: installed (LOAD delta), or loaded by path first.",
    ]


def cli_script(lake: Lake, *, include: Iterable[Path] = (), allow_list: AllowList | None = None) -> str:
    """A self-contained DuckDB script for the DuckDB CLI (with the delta extension), from any folder or
    host that reaches the lake: every view over `delta_scan` of the lake's Delta tables (each query reads
    the tables' versions current then, so the script stays right after later commits), the files in
    `include` (e.g. the mining helper views), the COMMENTs, and the lake's erasure mask read from the lake
    on every query. It names no file outside the lake, and making it writes no file anywhere. A table
    with no commit yet (the audits' stored failures before the first `audit --store-failures`) reads as
    zero rows until the script is printed again. Raises `LakeMissing` on a lake with no data,
    `LakeTablesOutdated` on tables older than their columns. `entitlements lake views` prints it."""
    allow = allow_list or default_allow_list()
    require_data(lake)
    texts, comments = _view_statements(lake, allow)
    parts = [
        *_script_head(lake),
        "LOAD delta;",
        "SET TimeZone = 'UTC';",
        f"SET VARIABLE lake_root = {literal(lake.uri)};",
        *texts,
        *(path.read_text(encoding="utf-8").strip() for path in include),
        *comments,
    ]
    return "\n".join(parts) + "\n"


def write_database(lake: Lake, target: Path, *, allow_list: AllowList | None = None) -> None:
    """A DuckDB database file at `target` (which must not exist) holding every view of `cli_script`
    over `delta_scan` of the lake's tables, with their COMMENTs: it stays right after later commits and
    from any folder or host that reaches the lake. A reader loads the delta extension first (`LOAD
    delta`, or the wheel's file by path) and sets `TimeZone = 'UTC'` to see times in UTC (a database
    keeps no setting). Nothing but `target` is written (DuckDB's write-ahead log beside it is folded
    in and removed when the file is closed). Raises `LakeMissing` on a lake with no data (nothing
    written)."""
    allow = allow_list or default_allow_list()
    require_data(lake)
    texts, comments = _view_statements(lake, allow)
    con = duckdb.connect(str(target))
    try:
        load_delta_extension(con)
        con.execute("SET TimeZone = 'UTC'")
        for text in texts:
            con.execute(text)
        for statement in comments:
            con.execute(statement)
        con.execute("CHECKPOINT")
    except BaseException:
        con.close()
        target.unlink(missing_ok=True)
        raise
    con.close()


def connect(
    lake: Lake,
    *,
    mask: Iterable[str] = (),
    from_snapshot: bool = False,
    views: Iterable[str] | None = None,
    as_of: datetime | None = None,
) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection with the views created (every one, or `views` and what they
    read), hiding every user an erasure has masked in the lake, and those in `mask`; with `as_of`, the
    lake as it stood then. Raises `LakeMissing` / `NoDataAsOf` (nothing is created)."""
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        create_views(con, lake, mask=mask, from_snapshot=from_snapshot, views=views, as_of=as_of)
    except BaseException:
        con.close()
        raise
    return con


_EXPLAIN = re.compile(r"\A\s*EXPLAIN\s+(?:ANALY[SZ]E\s+)?", re.IGNORECASE)
READ_ONLY_HINT = (
    "only one SELECT runs over the lake's views; write results with --output (CSV, Parquet, JSON)"
)
VIEWS_ONLY_HINT = "a query reads only the lake's views (schema/lake.md), never a file or a table function"
# DuckDB errors whose text quotes only the query, never a row's value.
_QUOTES_QUERY_ONLY = (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException)
# Where a name in a query may live: DuckDB's default catalog and schema (the views are created there).
_VIEW_CATALOGS = frozenset({"", "memory"})
_VIEW_SCHEMAS = frozenset({"", "main"})
# SHOW / DESCRIBE with no query of their own list the connection's catalog, never a row or a file.
_SHOW_LISTS = frozenset({'"tables"', "__show_tables_expanded", '"databases"'})


def read_only_statement(query: str) -> str:
    """`query` when it is one read of the lake's views: a single SELECT (FROM, WITH, VALUES, DESCRIBE,
    SHOW and SUMMARIZE parse as one), or an EXPLAIN of one, whose every table reference (walked in
    DuckDB's own parse tree) is a view of the lake or a CTE in scope. Anything else raises
    `QueryRefused`, before the lake is touched: CREATE, COPY, INSERT, SET, ATTACH, PRAGMA, LOAD, several
    statements; a table function (`read_csv`, `read_parquet`, `glob`, `delta_scan`: any), which would
    read past the erasure mask or any file on the host; a file path as a table (`FROM 'x.parquet'`);
    any other table (`erased_users`, DuckDB's catalogs)."""
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as error:
        raise QueryFailed(f"query refused by DuckDB's parser: {_one_line(str(error))}") from None
    if len(statements) != 1:
        raise QueryRefused(f"refused: the query holds {len(statements)} statements; {READ_ONLY_HINT}")
    kind = statements[0].type
    select = None
    if kind == duckdb.StatementType.EXPLAIN:
        try:
            inner = duckdb.extract_statements(_EXPLAIN.sub("", query, count=1))
        except duckdb.Error:
            inner = []
        if len(inner) == 1 and inner[0].type == duckdb.StatementType.SELECT:
            select = _EXPLAIN.sub("", query, count=1)
    elif kind == duckdb.StatementType.SELECT:
        select = query
    if select is None:
        raise QueryRefused(f"refused: {kind.name} is not a read; {READ_ONLY_HINT}")
    _refuse_other_sources(_parse_tree(select), frozenset())
    return query


def _parse_tree(select: str) -> Any:
    """DuckDB's parse tree of one SELECT (`json_serialize_sql`), from a connection that reads nothing."""
    con = duckdb.connect()
    try:
        (text,) = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [select]).fetchone() or ("",)
    finally:
        con.close()
    tree = json.loads(text)
    if tree.get("error"):
        # PRAGMA (parsed as a SELECT of a pragma) and PIVOT/UNPIVOT statements (several statements once
        # expanded) do not serialise: what they read cannot be checked. `FROM v PIVOT (...)` does.
        raise QueryRefused(f"refused: a PRAGMA or PIVOT statement is not checked as a read; {READ_ONLY_HINT}")
    return tree["statements"]


def _refuse_other_sources(node: Any, ctes: frozenset[str]) -> None:
    """Walk the parse tree: every table reference must be a lake view or a CTE visible where it is used
    (a CTE is visible in the node that defines it, recursive ones in their own definitions too)."""
    if isinstance(node, list):
        for item in node:
            _refuse_other_sources(item, ctes)
        return
    if not isinstance(node, dict):
        return
    cte_map = node.get("cte_map")
    if isinstance(cte_map, dict):
        ctes = ctes | {str(entry["key"]).lower() for entry in cte_map.get("map", [])}
    kind = node.get("type")
    if kind == "TABLE_FUNCTION":
        name = node.get("function", {}).get("function_name", "?")
        raise QueryRefused(f"refused: the table function {name} reads outside the views; {VIEWS_ONLY_HINT}")
    if kind == "BASE_TABLE" and not _is_view(node, ctes):
        # A path is never echoed (paths can name people); a plain identifier is a typo worth naming.
        name = str(node.get("table_name", ""))
        named = name if _IDENTIFIER.fullmatch(name) and not node.get("schema_name") else "a table"
        raise QueryRefused(f"refused: the query names {named}, which is not a lake view; {VIEWS_ONLY_HINT}")
    if kind == "SHOW_REF" and node.get("query") is None and node.get("table_name") not in _SHOW_LISTS:
        raise QueryRefused(f"refused: SHOW of something that is not a lake view; {VIEWS_ONLY_HINT}")
    for value in node.values():
        if isinstance(value, dict | list):
            _refuse_other_sources(value, ctes)


def _is_view(node: dict[str, Any], ctes: frozenset[str]) -> bool:
    name = str(node.get("table_name", "")).lower()
    if node.get("catalog_name", "") not in _VIEW_CATALOGS or node.get("schema_name", "") not in _VIEW_SCHEMAS:
        return False
    return name in _VIEW_NAME_SET or (
        name in ctes and not node.get("schema_name") and not node.get("catalog_name")
    )


def lock_down(con: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    """After `create_views`: the connection reads only the lake's folder and the views' schema anchors,
    loads and installs no extension, attaches nothing, and no statement can change that (DuckDB's
    `enable_external_access = false` with `allowed_directories`, then `lock_configuration`). The
    parse-tree check (`read_only_statement`) is what keeps a query to the views; this holds even where
    that check would miss something."""
    names = con.execute(
        "SELECT name FROM duckdb_variables() WHERE name LIKE '%\\_files' ESCAPE '\\'"
    ).fetchall()
    root = lake.uri.rstrip("/") + "/"
    folders = {root}
    for (name,) in names:
        (files,) = con.execute("SELECT getvariable(?)", [name]).fetchone() or ([],)
        for path in files or []:
            if not str(path).startswith(root):
                # A view's schema anchor: a local zero-row file (analytics/lake/_files.anchor_file).
                folders.add(os.path.dirname(os.path.abspath(str(path))) + "/")
    con.execute(f"SET allowed_directories = {path_list_literal(sorted(folders))}")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def run_read_only(con: duckdb.DuckDBPyConnection, query: str) -> pa.Table:
    """Run one read-only `query` (`read_only_statement`) on `con` and return its rows; DuckDB's errors
    become `QueryFailed`."""
    statement = read_only_statement(query)
    try:
        relation = con.sql(statement)
        return relation.to_arrow_table() if relation is not None else pa.table({})
    except duckdb.Error as error:
        if isinstance(error, _QUOTES_QUERY_ONLY):
            raise QueryFailed(f"query failed: {_one_line(str(error))}") from None
        raise QueryFailed(
            f"query failed: DuckDB {type(error).__name__} (its text may quote row values, so it is not "
            "shown; `entitlements --debug sql ...` shows it)"
        ) from error


def _one_line(text: str) -> str:
    return " ".join(text.split())


def duplicates_removed(lake: Lake) -> dict[str, int]:
    """Rows the `changes` and `outcomes` views' dedupe removed (raw rows minus the view's rows, both
    masked): the tables keep each identity once (analytics.lake._high_water), so this is a check that
    reads 0, not a repair."""
    con = connect(lake)
    try:
        counts = {}
        for name in ("changes", "outcomes"):
            query = f"SELECT (SELECT count(*) FROM raw_{name}) - (SELECT count(*) FROM {name})"  # noqa: S608
            counts[name] = int(con.execute(query).fetchall()[0][0])
    finally:
        con.close()
    return counts

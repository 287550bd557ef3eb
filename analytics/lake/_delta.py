"""The lake's tables as Delta tables (delta-rs): creation, atomic appends, the active files, deletes,
and the clean-up that erases to the last byte.

Every table of the lake is a Delta table in a directory of its own (`changes`, `outcomes`,
`snapshots/state`, `snapshots/as_of`). A write is one commit: delta-rs writes the data files (zstd),
then publishes them with one new log entry `_delta_log/<version>.json`, created only if absent (a local
create-if-absent, or an S3 conditional PUT), so readers see all of a commit or none of it and concurrent
writers on any host each get their own version (delta-rs retries a lost race on the next version).
Data files carry delta-rs's own names (`part-<n>-<uuid>-c000.zstd.parquet`): nothing in the lake is
named by what it holds.

Retention is set explicitly on every table (`TABLE_CONFIGURATION`): removed files stay 7 days for
readers of older versions and time travel, the log 30 days. An erasure overrides both for its own
clean-up (`expunge`): it ends time travel across it, by design (schema/lake.md, "Erasure").

Locally delta-rs creates files with the process's umask; the lake's root is owner-only (0700), so no
other user can reach them, and `append` narrows each commit's files to 0600 (folders 0700) right after.
"""

from __future__ import annotations

__all__ = [
    "TABLE_CONFIGURATION",
    "WRITER",
    "active_files",
    "append",
    "commits_since",
    "delete_rows",
    "ensure_table",
    "expunge",
    "open_table",
    "restrict_commit",
    "table_schema_names",
]

import json
import logging
import os
from collections.abc import Mapping
from typing import Any, Literal

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from analytics.lake._filesystem import Lake

logger = logging.getLogger(__name__)

LOG_DIR = "_delta_log"
RETAINED_FILES = "interval 7 days"
RETAINED_LOG = "interval 30 days"
TABLE_CONFIGURATION: Mapping[str, str] = {
    "delta.deletedFileRetentionDuration": RETAINED_FILES,
    "delta.logRetentionDuration": RETAINED_LOG,
}
WRITER = WriterProperties(compression="ZSTD")
_RETRIES = 5


def _options(lake: Lake) -> dict[str, str] | None:
    return dict(lake.storage_options) or None


def open_table(lake: Lake, name: str) -> DeltaTable | None:
    """The table at its latest version, or None when it was never created."""
    try:
        return DeltaTable(lake.table_uri(name), storage_options=_options(lake))
    except TableNotFoundError:
        return None


def ensure_table(lake: Lake, name: str, schema: pa.Schema, partition_by: tuple[str, ...] = ()) -> DeltaTable:
    """Open the table, creating it empty with `schema` (and the lake's retention) when it is missing.
    Writers creating it at once (threads, processes, hosts) all end with the one table: version 0 is
    written only if absent (a local create-if-absent, an S3 conditional PUT) and never retried, so every
    loser reopens the winner's table."""
    table = open_table(lake, name)
    if table is not None:
        return table
    try:
        table = DeltaTable.create(
            lake.table_uri(name),
            schema=schema,
            mode="ignore",
            partition_by=list(partition_by) or None,
            configuration=dict(TABLE_CONFIGURATION),
            storage_options=_options(lake),
            # delta-rs retries a lost version 0 as version 1: a second CREATE TABLE with another table
            # id over the first. No retry: the loser's commit fails and it reopens the table.
            commit_properties=CommitProperties(max_commit_retries=0),
        )
    except (CommitFailedError, DeltaError):
        table = open_table(lake, name)
        if table is None:
            raise
    restrict_commit(lake, name, table.version())
    return table


def append(
    lake: Lake,
    table: DeltaTable,
    name: str,
    data: pa.Table,
    *,
    partition_by: tuple[str, ...] = (),
    custom_metadata: Mapping[str, str] | None = None,
    mode: Literal["append", "overwrite"] = "append",
    predicate: str | None = None,
) -> int:
    """Write `data` as ONE commit (all of it or none; any error leaves the table as it was); returns the
    version committed. Columns the table lacks are added (schema evolution of the allow-list)."""
    known = set(table_schema_names(table))
    for attempt in range(_RETRIES):
        try:
            # Only a write bringing columns the table lacks changes its schema (allow-list growth).
            schema_mode: Literal["merge"] | None = "merge" if set(data.schema.names) - known else None
            commit = CommitProperties(
                custom_metadata=dict(custom_metadata) if custom_metadata else None, max_commit_retries=1000
            )
            if mode == "append":
                write_deltalake(
                    table,
                    data,
                    mode="append",
                    partition_by=list(partition_by) or None,
                    schema_mode=schema_mode,
                    writer_properties=WRITER,
                    commit_properties=commit,
                )
            else:
                write_deltalake(
                    table,
                    data,
                    mode="overwrite",
                    partition_by=list(partition_by) or None,
                    schema_mode=schema_mode,
                    predicate=predicate,
                    writer_properties=WRITER,
                    commit_properties=commit,
                )
            break
        except CommitFailedError:
            # A commit that read the table (an overwrite) lost to a concurrent rewrite, or an append
            # planned on a version a rewrite has since replaced: nothing was published. An append is
            # safe to redo on the new version; a rewrite must be re-planned by its caller.
            if mode != "append" or attempt == _RETRIES - 1:
                raise
            logger.info("commit lost to a concurrent rewrite; appending again", extra={"attempt": attempt})
            table.update_incremental()
    version = int(table.version())
    restrict_commit(lake, name, version)
    return version


def active_files(table: DeltaTable | None) -> list[tuple[str, int]]:
    """The data files of the table's loaded version, (table-relative path, bytes), sorted."""
    if table is None:
        return []
    actions = pa.table(table.get_add_actions(flatten=True))
    paths = actions["path"].to_pylist() if actions.num_rows else []
    sizes = actions["size_bytes"].to_pylist() if actions.num_rows else []
    return sorted(zip(paths, sizes, strict=True))


def table_schema_names(table: DeltaTable) -> list[str]:
    return [field.name for field in table.schema().fields]


def commits_since(lake: Lake, name: str, version: int, latest: int) -> list[list[dict[str, Any]]] | None:
    """The actions of each commit `version + 1 .. latest` as read from the log (None when any is gone:
    the log was cleaned past `version`, e.g. by an erasure)."""
    actions: list[list[dict[str, Any]]] = []
    for number in range(version + 1, latest + 1):
        path = lake.path(f"{name}/{LOG_DIR}/{number:020d}.json")
        try:
            with lake.fs.open_input_stream(path) as handle:
                text = handle.read().decode()
        except (FileNotFoundError, OSError):
            return None
        actions.append([json.loads(line) for line in text.splitlines() if line.strip()])
    return actions


def delete_rows(lake: Lake, name: str, predicate: str) -> tuple[int, int]:
    """Delete the rows matching `predicate` in one commit (retried on a conflict with a concurrent
    rewrite, which is then re-planned on the new version); returns (rows deleted, files rewritten)."""
    for attempt in range(_RETRIES):
        table = open_table(lake, name)
        if table is None:
            return 0, 0
        try:
            metrics = table.delete(predicate, writer_properties=WRITER)
        except CommitFailedError:
            logger.info("delete conflicted with a concurrent commit; retrying", extra={"attempt": attempt})
            continue
        restrict_commit(lake, name, table.version())
        rows = int(metrics.get("num_deleted_rows") or 0)
        return rows, int(metrics.get("num_removed_files") or 0) if rows else 0
    raise CommitFailedError("delete kept conflicting with concurrent commits")


def expunge(lake: Lake, name: str) -> None:
    """Erase what the log and removed files still hold, to the last byte: every removed file is
    vacuumed, a checkpoint is written, and every log entry before it is deleted (their statistics and
    DELETE predicates name erased ids). Files still referenced and files of commits in flight are kept
    (a "lite" vacuum deletes only files the log removed). Ends time travel to versions before it."""
    table = open_table(lake, name)
    if table is None:
        return
    table.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False, full=False)
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    table.create_checkpoint()
    table.cleanup_metadata()
    table.alter.set_table_properties({"delta.logRetentionDuration": RETAINED_LOG})
    restrict_commit(lake, name, table.version())


def restrict_commit(lake: Lake, name: str, version: int) -> None:
    """Locally, narrow a commit's log entry, data files and folders to the owner (files 0600, folders
    0700), and the checkpoint files beside them."""
    if not lake.is_local or version < 0:
        return
    root = lake.path(name)
    log = os.path.join(root, LOG_DIR)
    entry = os.path.join(log, f"{version:020d}.json")
    paths: list[str] = []
    try:
        with open(entry, encoding="utf-8") as handle:
            for line in handle:
                action = json.loads(line) if line.strip() else {}
                if "add" in action:
                    paths.append(os.path.join(root, action["add"]["path"]))
    except FileNotFoundError:
        pass
    paths.extend(os.path.join(log, n) for n in ("_last_checkpoint", f"{version:020d}.checkpoint.parquet"))
    paths.append(entry)
    folders = {root, log}
    for path in paths:
        try:
            os.chmod(path, 0o600)
        except FileNotFoundError:
            continue
        folder = os.path.dirname(path)
        while folder.startswith(root) and folder not in folders:
            folders.add(folder)
            folder = os.path.dirname(folder)
    for folder in folders:
        os.chmod(folder, 0o700)
    parent = os.path.dirname(root)
    while parent.startswith(lake.base) and parent != lake.base:
        os.chmod(parent, 0o700)
        parent = os.path.dirname(parent)

"""The lake's tables as Delta tables (delta-rs): creation, atomic appends, the active files, deletes,
and the clean-up that erases to the last byte.

Every table of the lake is a Delta table in a directory of its own (`changes`, `outcomes`,
`snapshots/state`, `snapshots/as_of`). A write is one commit: delta-rs writes the data files (zstd),
then publishes them with one new log entry `_delta_log/<version>.json`, created only if absent (a local
create-if-absent, or an S3 conditional PUT), so readers see all of a commit or none of it and concurrent
writers on any host each get their own version (delta-rs retries a lost race on the next version).
Data files carry delta-rs's own names (`part-<n>-<uuid>-c000.zstd.parquet`): nothing in the lake is
named by what it holds.

Every table is created with the shipped cadence (`TABLE_CONFIGURATION`, `config.LakeSettings`'
defaults): a checkpoint every 100 commits (`delta.checkpointInterval`, written by delta-rs's post-commit
hook), removed files kept 7 days for readers of older versions and time travel, the log 30 days. The
maintenance leader (`analytics.lake.maintenance`) moves a table to a deployment's own settings when they
differ. An erasure shortens the log's retention for its own clean-up (`expunge`) and then puts the
table's configured one back: it ends time travel across it, by design (schema/lake.md, "Erasure").

Locally delta-rs creates files with the process's umask; the lake's root is owner-only (0700), so no
other user can reach them, and `append` narrows each commit's files to 0600 (folders 0700) right after.
"""

from __future__ import annotations

__all__ = [
    "APPEND_HOOKS",
    "COMMIT_ID",
    "TABLE_CONFIGURATION",
    "WRITER",
    "Prepared",
    "active_files",
    "append",
    "commits_since",
    "delete_rows",
    "delta_interval",
    "ensure_table",
    "expunge",
    "last_checkpoint",
    "open_table",
    "restrict_commit",
    "table_schema_names",
]

import contextlib
import json
import logging
import os
import random
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import (
    CommitProperties,
    DeltaTable,
    PostCommitHookProperties,
    Transaction,
    WriterProperties,
    write_deltalake,
)
from deltalake.exceptions import (
    CommitFailedError,
    DeltaError,
    DeltaProtocolError,
    SchemaMismatchError,
    TableNotFoundError,
)

from analytics.lake._filesystem import Lake
from config import LakeSettings

logger = logging.getLogger(__name__)

LOG_DIR = "_delta_log"


def delta_interval(hours: int) -> str:
    """A Delta duration as the lake's tables carry it ("interval 7 days", "interval 36 hours")."""
    return f"interval {hours // 24} days" if hours % 24 == 0 else f"interval {hours} hours"


# The shipped cadence is LakeSettings' defaults: one source, whatever reads it.
_SHIPPED = LakeSettings()
RETAINED_LOG = delta_interval(_SHIPPED.log_retention_hours)
TABLE_CONFIGURATION: Mapping[str, str] = {
    "delta.checkpointInterval": str(_SHIPPED.checkpoint_interval),
    "delta.deletedFileRetentionDuration": delta_interval(_SHIPPED.removed_file_retention_hours),
    "delta.logRetentionDuration": RETAINED_LOG,
}
_LOG_RETENTION = "delta.logRetentionDuration"
# What `expunge` shortens the log's retention to, for its own clean-up only.
_EXPUNGE_LOG_RETENTION = "interval 0 seconds"
WRITER = WriterProperties(compression="ZSTD")
# An append's post-commit hook writes no checkpoint and cleans up no expired log entries; the
# maintenance leader does both (`analytics.lake.maintenance`), and `expunge` its own. A checkpoint
# holds the state its writer read: a writer's hook builds it from the writer's own snapshot, and an
# append stranded below an erasure's checkpoint (`_stranded`) would publish a checkpoint of a state
# from before the erasure's DELETE (its files' statistics naming the erased ids) and point
# `_last_checkpoint` back at it; the leader checkpoints a table it has just opened. The clean-up lists
# the whole `_delta_log` folder (no start-after): on every commit it cost a LIST growing with the log.
APPEND_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
# Every append's commit carries its own id under this key (commitInfo), so an append that raised
# after its commit was published can find it and not commit twice.
COMMIT_ID = "lake.commit_id"
_RETRIES = 5
_ATTEMPTS = 12  # an append's attempts: an erasure's clean-up is a few commits long
_OPEN_ATTEMPTS = 6
_PAUSE = 0.02
_PAUSE_CAP = 1.0
_ENTRY = re.compile(r"\d{20}\.json")
# What `append`'s `prepare` returns: the rows to commit and the `txn` actions the commit carries.
Prepared = tuple[pa.Table, Sequence[Transaction]]


def _options(lake: Lake) -> dict[str, str] | None:
    return dict(lake.storage_options) or None


def open_table(lake: Lake, name: str) -> DeltaTable | None:
    """The table at its latest version, or None when it was never created.

    An erasure's clean-up deletes older checkpoints: a load that read `_last_checkpoint` just before
    can find its checkpoint gone. Such a load is tried again (a few times, briefly) before its error
    is raised."""
    for attempt in range(_OPEN_ATTEMPTS):
        try:
            return DeltaTable(lake.table_uri(name), storage_options=_options(lake))
        except TableNotFoundError:
            return None
        except (SchemaMismatchError, DeltaProtocolError):
            raise
        except (DeltaError, FileNotFoundError):
            if attempt == _OPEN_ATTEMPTS - 1:
                raise
            _pause(attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def ensure_table(
    lake: Lake,
    name: str,
    schema: pa.Schema,
    partition_by: tuple[str, ...] = (),
    *,
    table_name: str | None = None,
    description: str | None = None,
) -> DeltaTable:
    """Open the table, creating it empty with `schema` (and the lake's retention) when it is missing;
    `table_name` and `description` go into the new table's Delta metadata, for outside readers.
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
            name=table_name,
            description=description,
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
    prepare: Callable[[DeltaTable], Prepared] | None = None,
) -> int:
    """Write `data` as ONE commit (all of it or none; any error leaves the table as it was); returns the
    version committed. Columns the table lacks are added (schema evolution of the allow-list).

    With `prepare` (appends only), each attempt first asks it what to commit against the version the
    attempt writes on: the rows (a part of `data`) and the `txn` actions the commit carries (the
    shards' high-water marks, `analytics.lake._high_water`). A commit that loses to a concurrent
    commit carrying one of its application ids fails in delta-rs's conflict check, and is prepared
    again on the newest version; a commit left with no rows is not made (the table's version is
    returned).

    An append survives concurrent commits and an erasure's clean-up of the log: when the version
    `table` was read at has been cleaned away (its log entries or checkpoint deleted, "Invalid table
    version"), it reopens the table at its newest version and commits there. Each append carries an
    id (`COMMIT_ID`) in its commit, so one that failed after its commit was published (a
    post-commit step) is found in the log and not committed twice. `table` itself is brought to the
    committed version when it can be; a caller keeping it checks `version()` against the result.

    An append can also land where no reader looks (`_stranded`): delta-rs reads the newest version
    before it writes its data files and publishes `<version>.json` create-if-absent after; an
    expunge that checkpointed a later version and deleted the entries before it in between leaves
    that name free, so the commit is published below the checkpoint, which does not hold it. Such a
    commit is taken back (its entry and data files deleted) and appended again on the newest version."""
    commit_id = uuid.uuid4().hex
    metadata = {**(custom_metadata or {}), COMMIT_ID: commit_id}
    since = int(table.version())
    current = table
    for attempt in range(_ATTEMPTS):
        transactions: Sequence[Transaction] = ()
        try:
            if prepare is not None:
                data, transactions = prepare(current)
                if not data.num_rows:
                    break
            _write(
                current,
                data,
                partition_by=partition_by,
                metadata=metadata,
                mode=mode,
                predicate=predicate,
                transactions=transactions,
            )
            if mode == "append" and _stranded(lake, name, current, commit_id, transactions):
                logger.info("commit stranded below a checkpoint; appending again", extra={"attempt": attempt})
                current = _reopened(lake, name)
                continue
            break
        except (SchemaMismatchError, DeltaProtocolError):
            raise  # the data or the table is at fault: no reload changes that
        except CommitFailedError:
            # A commit that read the table (an overwrite) lost to a concurrent rewrite, an append
            # planned on a version a rewrite has since replaced, or an append whose shard another
            # writer committed meanwhile (its `txn` application ids): nothing was published. An
            # append is redone on the new version (prepared again there); a rewrite must be
            # re-planned by its caller.
            if mode != "append" or attempt == _ATTEMPTS - 1:
                raise
            logger.info("commit lost to a concurrent rewrite; appending again", extra={"attempt": attempt})
            current = _refreshed(lake, name, current)
        except (DeltaError, FileNotFoundError):
            # The snapshot `current` was read at is gone (an erasure deletes the log before its
            # checkpoint, and older checkpoints: delta-rs says "Invalid table version" or raises
            # FileNotFoundError), so the commit could not be checked against the commits since; or the
            # commit landed and a step after it (a checkpoint) failed. A rewrite must be re-planned.
            if mode != "append" or attempt == _ATTEMPTS - 1:
                raise
            logger.info("table snapshot cleaned away; reopening it", extra={"attempt": attempt})
            _pause(attempt)
            current = _reopened(lake, name)
            landed = _version_with_id(lake, name, commit_id, since)
            if landed is not None:
                restrict_commit(lake, name, landed)
                return landed
    version = int(current.version())
    if current is not table:
        with contextlib.suppress(DeltaError):
            table.update_incremental()  # the caller's object, when its log still reads
    restrict_commit(lake, name, version)
    return version


def _write(
    table: DeltaTable,
    data: pa.Table,
    *,
    partition_by: tuple[str, ...],
    metadata: dict[str, str],
    mode: Literal["append", "overwrite"],
    predicate: str | None,
    transactions: Sequence[Transaction] = (),
) -> None:
    # Only a write bringing columns the table lacks changes its schema (allow-list growth).
    known = set(table_schema_names(table))
    schema_mode: Literal["merge"] | None = "merge" if set(data.schema.names) - known else None
    # delta-rs retries a commit that lost the race to a commit it does not conflict with, without
    # rewriting the files; one carrying a `txn` of the same application id is a conflict it does not
    # retry (it raises CommitFailedError), so the caller plans that commit again.
    commit = CommitProperties(
        custom_metadata=metadata, max_commit_retries=1000, app_transactions=list(transactions) or None
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
            post_commithook_properties=APPEND_HOOKS,
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
            post_commithook_properties=APPEND_HOOKS,
        )


def _stranded(
    lake: Lake, name: str, table: DeltaTable, commit_id: str, transactions: Sequence[Transaction]
) -> bool:
    """Whether the append just published as `table.version()` was stranded below a checkpoint that
    does not hold it (see `append`); a stranded commit's own log entry and data files are deleted.

    Only a checkpoint newer than the commit can have been written without it, so the usual answer
    costs one small read (`_last_checkpoint`). Past one, the commit landed when the newest version
    holds a file it added; when its entry is already gone (a second expunge), when the newest version
    holds each of its `txn` versions. A landed commit whose files a later commit rewrote within that
    moment would be taken for stranded and appended again: harmless for the landing's appends, which
    are planned again on the newest version and drop the rows it holds (`analytics.lake._high_water`)."""
    version = int(table.version())
    checkpoint = last_checkpoint(lake, name)
    if checkpoint is None or checkpoint <= version:
        return False
    entry = (commits_since(lake, name, version - 1, version) or [[]])[0]
    if not any(action.get("commitInfo", {}).get(COMMIT_ID) == commit_id for action in entry):
        entry = []  # the entry is gone (a later expunge took it) or it is not this commit's
    added = {unquote(action["add"]["path"]) for action in entry if "add" in action}
    latest = _reopened(lake, name)
    if not entry:
        return bool(transactions) and any(
            (latest.transaction_version(t.app_id) or -1) < t.version for t in transactions
        )
    if added & {unquote(path) for path, _ in active_files(latest)}:
        return False
    for relative in [f"{LOG_DIR}/{version:020d}.json", *sorted(added)]:
        with contextlib.suppress(FileNotFoundError, OSError):
            lake.fs.delete_file(lake.path(f"{name}/{relative}"))
    return True


def last_checkpoint(lake: Lake, name: str) -> int | None:
    """The version `_delta_log/_last_checkpoint` names, or None when the table has no checkpoint."""
    try:
        with lake.fs.open_input_stream(lake.path(f"{name}/{LOG_DIR}/_last_checkpoint")) as handle:
            return int(json.loads(handle.read().decode())["version"])
    except (FileNotFoundError, OSError, ValueError, KeyError):
        return None


def _pause(attempt: int) -> None:
    """A short, growing, jittered wait between attempts, so racing writers do not retry in step."""
    time.sleep(min(_PAUSE_CAP, _PAUSE * 2**attempt) * (0.5 + random.random()))  # noqa: S311


def _refreshed(lake: Lake, name: str, table: DeltaTable) -> DeltaTable:
    """`table` at the newest version: updated in place, or reopened when its log was cleaned away."""
    try:
        table.update_incremental()
    except (DeltaError, FileNotFoundError):
        return _reopened(lake, name)
    return table


def _reopened(lake: Lake, name: str) -> DeltaTable:
    table = open_table(lake, name)
    if table is None:
        raise TableNotFoundError(f"table {name} is gone")
    return table


def _version_with_id(lake: Lake, name: str, commit_id: str, since: int) -> int | None:
    """The version after `since` whose commit carries `commit_id`, if the log still holds it."""
    selector = pafs.FileSelector(lake.path(f"{name}/{LOG_DIR}"), allow_not_found=True)
    versions = sorted(
        int(info.base_name.removesuffix(".json"))
        for info in lake.fs.get_file_info(selector)
        if _ENTRY.fullmatch(info.base_name) and int(info.base_name.removesuffix(".json")) > since
    )
    for version in versions:
        entries = commits_since(lake, name, version - 1, version)
        for action in (entries or [[]])[0]:
            if action.get("commitInfo", {}).get(COMMIT_ID) == commit_id:
                return version
    return None


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
    rewrite, or on a snapshot an erasure's clean-up took away, each time re-planned on the newest
    version; a delete is idempotent); returns (rows deleted, files rewritten)."""
    for attempt in range(_ATTEMPTS):
        table = open_table(lake, name)
        if table is None:
            return 0, 0
        try:
            metrics = table.delete(predicate, writer_properties=WRITER)
        except (SchemaMismatchError, DeltaProtocolError):
            raise
        except (DeltaError, FileNotFoundError):
            logger.info("delete conflicted with a concurrent commit; retrying", extra={"attempt": attempt})
            _pause(attempt)
            continue
        restrict_commit(lake, name, table.version())
        rows = int(metrics.get("num_deleted_rows") or 0)
        return rows, int(metrics.get("num_removed_files") or 0) if rows else 0
    raise CommitFailedError("delete kept conflicting with concurrent commits")


def expunge(lake: Lake, name: str) -> None:
    """Erase what the log and removed files still hold, to the last byte: every removed file is
    vacuumed, a checkpoint is written, and every log entry before it is deleted (their statistics and
    DELETE predicates name erased ids). Files still referenced and files of commits in flight are kept
    (a "lite" vacuum deletes only files the log removed). Ends time travel to versions before it.

    delta-rs deletes log entries by the table's `delta.logRetentionDuration` only, so the clean-up
    shortens it and then puts back the retention the table was configured with (read before; the
    lake's shipped one when a killed expunge had left it short), whatever happens.

    Writers keep committing meanwhile: a step that loses to one of their commits (or finds its own
    snapshot cleaned away by a concurrent expunge) is redone on the newest version; every step is
    idempotent."""
    for attempt in range(_ATTEMPTS):
        table = open_table(lake, name)
        if table is None:
            return
        try:
            configured = _configured_log_retention(table)
            table.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False, full=False)
            table.alter.set_table_properties({_LOG_RETENTION: _EXPUNGE_LOG_RETENTION})
            try:
                table.create_checkpoint()
                table.cleanup_metadata()
            finally:
                _restore_log_retention(lake, name, configured)
        except (SchemaMismatchError, DeltaProtocolError):
            raise
        except (DeltaError, FileNotFoundError):
            if attempt == _ATTEMPTS - 1:
                raise
            logger.info(
                "expunge met a concurrent commit; again on the newest version", extra={"attempt": attempt}
            )
            _pause(attempt)
            continue
        restrict_commit(lake, name, table.version())  # the checkpoint's version
        latest = open_table(lake, name)
        if latest is not None and latest.version() != table.version():
            restrict_commit(lake, name, latest.version())  # the retention's restoring commit
        return


def _configured_log_retention(table: DeltaTable) -> str:
    """The log retention the table is configured with. An expunge's own short one (a concurrent
    expunge's, or one killed before it restored) is no configuration: then the lake's shipped one
    (the maintenance leader moves it on to a deployment's own)."""
    configured = table.metadata().configuration.get(_LOG_RETENTION)
    if configured is None or configured == _EXPUNGE_LOG_RETENTION:
        return RETAINED_LOG
    return configured


def _restore_log_retention(lake: Lake, name: str, retention: str) -> None:
    """Set the table's log retention to `retention`, on the newest version (retried like a commit)."""
    for attempt in range(_ATTEMPTS):
        table = open_table(lake, name)
        if table is None:
            return
        try:
            table.alter.set_table_properties({_LOG_RETENTION: retention})
            return
        except (DeltaError, FileNotFoundError):
            if attempt == _ATTEMPTS - 1:
                raise
            _pause(attempt)


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

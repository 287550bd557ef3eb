"""Purge: delete every row of given users from every table, then erase what Delta still holds of them.

One call takes a batch of user ids. In each table (`changes`, `outcomes`, `snapshots/state`,
`snapshots/as_of`, and the audits' stored failures `audits/failures`) one DELETE commit rewrites the data
files holding a row of any of them (a row belongs to a user when one of its user-id columns,
`USER_ID_COLUMNS`, is one of the ids, or its partition key is `USER#<id>`, or a stored finding's JSON,
`JSON_COLUMNS`, holds either as a string value); then `expunge`
vacuums the files the log removed, checkpoints and deletes the log before the checkpoint, since old log
entries carry the ids in file statistics and in the DELETE's own predicate. After it, no byte of the
lake's files names an erased id, and time travel to a version before the purge is gone (by design).

A purge and a compaction (or a snapshot consolidation) that overlap: Delta's conflict check fails the
later of the two commits when it removes a file the other removed, so a compaction planned before the
purge cannot commit a file holding the purged rows; the DELETE is then re-planned and retried. A
snapshot never folds a masked user, so one running beside the purge writes none of their rows back.

Files no version references: a commit that fails after writing its data files (a failing log write, a
process killed mid-commit, a compaction refused by the purge's own DELETE) leaves Parquet files that
the log never names and that delta-rs's lite vacuum never deletes; a commit's temporary log file
(`_delta_log/_commit_*.tmp`) can stay the same way. After the clean-up, each table's folder is listed
and every such file older than `ORPHAN_AGE` is deleted, whatever it holds. The age bound is what keeps
a commit in flight safe: its data files are referenced by no version until its log entry lands, so
only a file older than any commit can take is known to belong to a commit that will never land.
Every commit here is one call that writes its files and publishes them within seconds to a few
minutes (a landing flush of `flush_rows` rows, a partition's compaction or deduplication, a
snapshot); `ORPHAN_AGE` is 15 minutes, several times the longest, and a quarter of an erasure
request's life (3,300 s), so the redeliveries of the same ERASE still find and delete a file a commit
failed to publish just before it. Until then `holds` (which reads every file under each table,
referenced or not) answers that the user is held, so no erasure is acknowledged over such a file.

Locally every file under each purged table ends 0600 and every folder 0700 (`restrict_tree`): delta-rs
writes with the umask, and the clean-up's checkpoint and log entries are named by no commit's own
restriction.

Views hide erased users before their rows are purged (the mask). A consumer replaying the stream after a
purge can land the user's events again: the landing filter keeps an erased user's events out.
"""

from __future__ import annotations

__all__ = [
    "AUDIT_FAILURES",
    "JSON_COLUMNS",
    "ORPHAN_AGE",
    "PURGED_DATASETS",
    "USER_ID_COLUMNS",
    "PurgeCounts",
    "purge_users",
    "remove_orphans",
]

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from analytics.lake._delta import (
    active_files,
    commits_since,
    delete_rows,
    expunge,
    open_table,
    table_schema_names,
)
from analytics.lake._duck import literal
from analytics.lake._files import AS_OF_DIR
from analytics.lake._filesystem import Lake, restrict_tree
from analytics.lake._schema import AUDIT_FAILURES, CHANGES, OUTCOMES, STATE_DIR
from analytics.lake._traces import LOG_DIR, table_files
from analytics.lake._versions import oldest_version
from schema.table import USER_PK_PREFIX

logger = logging.getLogger(__name__)

PURGED_DATASETS: tuple[str, ...] = (CHANGES, OUTCOMES, STATE_DIR, AS_OF_DIR, AUDIT_FAILURES)
# The columns naming a user: a row belongs to every user one of them names (and to the user of its `pk`).
USER_ID_COLUMNS: tuple[str, ...] = ("user_id", "other_user_id")
# Columns holding a row as JSON (the audits' stored finding): a row naming a user anywhere in it is theirs.
JSON_COLUMNS: tuple[str, ...] = ("row",)
# A file referenced by no version and older than this belongs to a commit that failed (module docstring).
ORPHAN_AGE = timedelta(minutes=15)


@dataclass(frozen=True)
class PurgeCounts:
    """Rows deleted and files rewritten, per table."""

    rows: Mapping[str, int]
    files_rewritten: Mapping[str, int]
    # Files of failed commits deleted (referenced by no version, older than ORPHAN_AGE), per table.
    orphans_removed: Mapping[str, int] = field(default_factory=dict)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def _predicate(columns: set[str], ids: list[str]) -> str | None:
    listed = ", ".join(literal(u) for u in ids)
    clauses = [f"{column} IN ({listed})" for column in USER_ID_COLUMNS if column in columns]
    if "pk" in columns:
        clauses.append(f"pk IN ({', '.join(literal(USER_PK_PREFIX + u) for u in ids)})")
    for column in JSON_COLUMNS:
        if column in columns:
            # A JSON string equal to the id or its key (quotes included): a whole value, never a part.
            clauses.extend(
                f'strpos("{column}", {literal(json.dumps(value))}) > 0'
                for u in ids
                for value in (u, USER_PK_PREFIX + u)
            )
    return " OR ".join(clauses) or None


def purge_users(
    lake: Lake,
    user_ids: Iterable[str],
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> PurgeCounts:
    """Delete every row of `user_ids` from every table, erase them from the tables' logs and removed
    files, and delete the files failed commits left (see the module's docstring). `clock` dates the
    orphan bound (injectable for tests)."""
    ids = sorted(set(user_ids))
    rows: dict[str, int] = dict.fromkeys(PURGED_DATASETS, 0)
    files: dict[str, int] = dict.fromkeys(PURGED_DATASETS, 0)
    orphans: dict[str, int] = dict.fromkeys(PURGED_DATASETS, 0)
    if not ids:
        return PurgeCounts(rows, files, orphans)
    for name in PURGED_DATASETS:
        table = open_table(lake, name)
        if table is None:
            continue
        predicate = _predicate(set(table_schema_names(table)), ids)
        if predicate is None:
            continue
        rows[name], files[name] = delete_rows(lake, name, predicate)
        expunge(lake, name)
        orphans[name] = remove_orphans(lake, name, older_than=clock() - ORPHAN_AGE)
        restrict_tree(lake, name)
    logger.info(
        "purge done",
        extra={
            "rows": sum(rows.values()),
            "files": sum(files.values()),
            "orphans": sum(orphans.values()),
        },
    )
    return PurgeCounts(rows, files, orphans)


def remove_orphans(lake: Lake, name: str, *, older_than: datetime) -> int:
    """Delete the files under table `name` that no version its log still holds references and that
    were last written before `older_than`: data files of failed commits (and files removed before the
    log's oldest version that a vacuum has not deleted), and commits' temporary log files. Returns how
    many were deleted.

    The folder is listed before the table is loaded, so a file committed between the two is seen as
    referenced; one committed after the load was written by a commit older than the bound, which no
    commit here takes (module docstring)."""
    listed = table_files(lake, name)
    table = open_table(lake, name)
    if table is None:
        return 0
    known = _referenced(lake, name, table)
    if known is None:
        return 0
    referenced = {lake.path(f"{name}/{path}") for path in known}
    cutoff = int(older_than.timestamp() * 1_000_000_000)
    log_prefix = lake.path(f"{name}/{LOG_DIR}/")
    removed = 0
    for info in listed:
        path = str(info.path)
        if path in referenced or info.mtime_ns is None or info.mtime_ns >= cutoff:
            continue
        if path.startswith(log_prefix):
            # The log's own entries, checkpoints and `_last_checkpoint` are the table; only a commit's
            # temporary file (`_commit_<uuid>.json.tmp`) is left over by a failed commit.
            if not info.base_name.endswith(".tmp"):
                continue
        elif not info.base_name.endswith(".parquet"):
            continue
        try:
            lake.fs.delete_file(path)
        except FileNotFoundError:
            continue  # a concurrent vacuum or purge deleted it first
        removed += 1
    if removed:
        logger.info("orphan files removed", extra={"files": removed})
    return removed


def _referenced(lake: Lake, name: str, table: DeltaTable) -> set[str] | None:
    """The table-relative paths of the data files any version from the log's oldest to `table`'s
    references: the oldest version's files and every file a later commit added (a reader of any version
    still in the log keeps its files). None when the log moved meanwhile (a concurrent purge cleaned
    it): then nothing is deleted this time."""
    paths = {path for path, _ in active_files(table)}
    latest = int(table.version())
    oldest = oldest_version(lake, name)
    if oldest is None or oldest >= latest:
        return paths
    past = open_table(lake, name)
    commits = commits_since(lake, name, oldest, latest)
    if past is None or commits is None:
        return None
    try:
        past.load_as_version(oldest)
    except DeltaError:
        return None
    paths.update(path for path, _ in active_files(past))
    for actions in commits:
        paths.update(str(action["add"]["path"]) for action in actions if "add" in action)
    # Log entries store paths URI-encoded; the listing names files as they are on disk.
    return paths | {unquote(path) for path in paths}

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

Each user's rows are counted per table before the DELETE, with the same predicate, in one query per
table over the data files of the version the purge reads (`PurgeCounts.rows_by_user`): an erasure's
receipt says what was removed of that user, not of its batch. A row naming two erased users counts for
each; the DELETE's own total (`rows`) is what the commit removed.

A table that holds no row of the batch's users (counted as above) and whose log holds nothing an
earlier removal left (`_log_may_name_erased`: no entry older than its newest checkpoint, no held entry
that removed a file) is left as it is: no DELETE, no clean-up (its files are still swept for orphans).
Nothing of theirs can rest there: a log of appends since the table's last clean-up names only what its
current files hold, and a DELETE or clean-up that did not finish (a killed purge) leaves its own
entries, so the next purge cleans the table. This is what a second pass usually finds (the first pass
purged the users, the landing filter keeps their events out), and what every table holding none of a
batch's users costs: counting, not four commits.

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
    "rows_per_user",
]

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
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
from analytics.lake._duck import connect, literal, path_list
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
# Reading a version's files again after a concurrent commit removed one of them (then vacuumed).
_COUNT_ATTEMPTS = 3
# A log entry (`<version>.json`) or checkpoint (`<version>.checkpoint[.<part>.<parts>].parquet`).
_LOG_ENTRY = re.compile(r"\A(\d{20})\.(json|checkpoint(?:\.\d+\.\d+)?\.parquet)\Z")


@dataclass(frozen=True)
class PurgeCounts:
    """Rows deleted and files rewritten, per table."""

    rows: Mapping[str, int]
    files_rewritten: Mapping[str, int]
    # Files of failed commits deleted (referenced by no version, older than ORPHAN_AGE), per table.
    orphans_removed: Mapping[str, int] = field(default_factory=dict)
    # Per user, the rows of theirs each table held just before its DELETE (tables with none omitted).
    rows_by_user: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

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
    by_user: dict[str, dict[str, int]] = {}
    if not ids:
        return PurgeCounts(rows, files, orphans)
    skipped = 0
    for name in PURGED_DATASETS:
        table = open_table(lake, name)
        if table is None:
            continue
        predicate = _predicate(set(table_schema_names(table)), ids)
        if predicate is None:
            continue
        found = rows_per_user(lake, name, ids, table=table)
        for user_id, count in found.items():
            by_user.setdefault(user_id, {})[name] = count
        if found or _log_may_name_erased(lake, name):
            rows[name], files[name] = delete_rows(lake, name, predicate)
            expunge(lake, name)
        else:
            skipped += 1  # nothing of theirs rests in it: no DELETE, no clean-up (module docstring)
        orphans[name] = remove_orphans(lake, name, older_than=clock() - ORPHAN_AGE)
        restrict_tree(lake, name)
    logger.info(
        "purge done",
        extra={
            "rows": sum(rows.values()),
            "files": sum(files.values()),
            "orphans": sum(orphans.values()),
            "tables_untouched": skipped,
        },
    )
    return PurgeCounts(rows, files, orphans, by_user)


def _log_may_name_erased(lake: Lake, name: str) -> bool:
    """Whether table `name`'s log may still hold what an earlier removal left: an entry older than its
    newest checkpoint (a clean-up not finished, or the checkpoint every 100 commits), or an entry still
    held that removed a file (a DELETE whose clean-up did not run, a compaction's removed files). Either
    way the purge cleans the table; a log of appends since its last clean-up names no one without a
    row in the table's current files."""
    selector = pafs.FileSelector(lake.path(f"{name}/{LOG_DIR}"), allow_not_found=True)
    entries: list[tuple[int, str]] = []
    checkpoints: list[int] = []
    for info in lake.fs.get_file_info(selector):
        match = _LOG_ENTRY.match(info.base_name)
        if match is None:
            continue
        if match.group(2) == "json":
            entries.append((int(match.group(1)), str(info.path)))
        else:
            checkpoints.append(int(match.group(1)))
    newest_checkpoint = max(checkpoints, default=None)
    for version, path in entries:
        if newest_checkpoint is not None and version < newest_checkpoint:
            return True
        try:
            with lake.fs.open_input_stream(path) as handle:
                text = handle.read().decode()
        except FileNotFoundError:
            return True  # cleaned meanwhile by a concurrent clean-up: clean again, to be sure
        if any('"remove"' in line and "remove" in json.loads(line) for line in text.splitlines()):
            return True
    return False


def rows_per_user(
    lake: Lake, name: str, user_ids: Iterable[str], *, table: DeltaTable | None = None
) -> dict[str, int]:
    """Per user, how many rows of table `name`'s newest version the purge's predicate takes for them
    (a row naming two of them counts for each); users with none are absent. One query for the batch.
    `table`, when given, is that table just loaded (the first attempt counts on it, not on a reload)."""
    ids = sorted(set(user_ids))
    loaded = table
    for attempt in range(_COUNT_ATTEMPTS):
        table, loaded = (loaded if loaded is not None else open_table(lake, name)), None
        if table is None or not ids:
            return {}
        columns = set(table_schema_names(table))
        files = [path for path, _ in active_files(table)]
        matches = _owner_clauses(columns)
        if not files or not matches:
            return {}
        con = connect(lake)
        try:
            con.register("erased", _erased_keys(ids))  # the ids are data, never SQL text
            source = f"read_parquet({path_list(lake, [f'{name}/{p}' for p in files])}, union_by_name = true)"
            found = con.execute(
                f"SELECT e.user_id, count(*) FROM {source} AS t, erased AS e "  # noqa: S608 (paths quoted)
                f"WHERE {' OR '.join(matches)} GROUP BY e.user_id"
            ).fetchall()
        except (duckdb.IOException, FileNotFoundError):
            if attempt == _COUNT_ATTEMPTS - 1:
                raise
            continue  # a file of that version was vacuumed meanwhile: count on the newest one
        finally:
            con.close()
        return {str(user_id): int(count) for user_id, count in found}
    return {}


def _erased_keys(ids: list[str]) -> pa.Table:
    """Each user with the values `_predicate` matches them on: the id, the item key, their JSON texts."""
    return pa.table(
        {
            "user_id": ids,
            "pk": [USER_PK_PREFIX + u for u in ids],
            "json_id": [json.dumps(u) for u in ids],
            "json_pk": [json.dumps(USER_PK_PREFIX + u) for u in ids],
        }
    )


def _owner_clauses(columns: set[str]) -> list[str]:
    """`_predicate`'s clauses, for one user `e` of the `erased` relation against row `t`."""
    clauses = [f't."{column}" = e.user_id' for column in USER_ID_COLUMNS if column in columns]
    if "pk" in columns:
        clauses.append("t.pk = e.pk")
    for column in JSON_COLUMNS:
        if column in columns:
            clauses += [f'strpos(t."{column}", e.json_id) > 0', f'strpos(t."{column}", e.json_pk) > 0']
    return clauses


def remove_orphans(lake: Lake, name: str, *, older_than: datetime) -> int:
    """Delete the files under table `name` that no version its log still holds references and that
    were last written before `older_than`: data files of failed commits (and files removed before the
    log's oldest version that a vacuum has not deleted), and commits' temporary log files. Returns how
    many were deleted.

    The folder is listed before the table is loaded, so a file committed between the two is seen as
    referenced; one committed after the load was written by a commit older than the bound, which no
    commit here takes (module docstring)."""
    cutoff = int(older_than.timestamp() * 1_000_000_000)
    log_prefix = lake.path(f"{name}/{LOG_DIR}/")
    candidates = [
        info
        for info in table_files(lake, name)
        if info.mtime_ns is not None
        and info.mtime_ns < cutoff
        # The log's own entries, checkpoints and `_last_checkpoint` are the table; only a commit's
        # temporary file (`_commit_<uuid>.json.tmp`) is left over by a failed commit.
        and (
            info.base_name.endswith(".tmp")
            if str(info.path).startswith(log_prefix)
            else info.base_name.endswith(".parquet")
        )
    ]
    if not candidates:
        return 0  # nothing old enough to be an orphan: the log need not be read
    table = open_table(lake, name)
    if table is None:
        return 0
    known = _referenced(lake, name, table)
    if known is None:
        return 0
    referenced = {lake.path(f"{name}/{path}") for path in known}
    removed = 0
    for info in candidates:
        path = str(info.path)
        if path in referenced:
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

"""Purge: delete every row of given users from every table, then erase what Delta still holds of them.

One call takes a batch of user ids. In each table (`changes`, `outcomes`, `snapshots/state`,
`snapshots/as_of`, and the audits' stored failures `audits/failures`) one DELETE commit rewrites the data
files holding a row of any of them (a row belongs to a user when one of its user-id columns,
`USER_ID_COLUMNS`, is one of the ids, or its partition key is `USER#<id>`); then `expunge`
vacuums the files the log removed, checkpoints and deletes the log before the checkpoint, since old log
entries carry the ids in file statistics and in the DELETE's own predicate. After it, no byte of the
lake's files names an erased id, and time travel to a version before the purge is gone (by design).

A purge and a compaction (or a snapshot consolidation) that overlap: Delta's conflict check fails the
later of the two commits when it removes a file the other removed, so a compaction planned before the
purge cannot commit a file holding the purged rows; the DELETE is then re-planned and retried. A
snapshot never folds a masked user, so one running beside the purge writes none of their rows back.

Views hide erased users before their rows are purged (the mask). A consumer replaying the stream after a
purge can land the user's events again: the landing filter keeps an erased user's events out.
"""

from __future__ import annotations

__all__ = ["AUDIT_FAILURES", "PURGED_DATASETS", "USER_ID_COLUMNS", "PurgeCounts", "purge_users"]

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from analytics.lake._delta import delete_rows, expunge, open_table, table_schema_names
from analytics.lake._duck import literal
from analytics.lake._files import AS_OF_DIR
from analytics.lake._filesystem import Lake
from analytics.lake._schema import AUDIT_FAILURES, CHANGES, OUTCOMES, STATE_DIR
from schema.table import USER_PK_PREFIX

logger = logging.getLogger(__name__)

PURGED_DATASETS: tuple[str, ...] = (CHANGES, OUTCOMES, STATE_DIR, AS_OF_DIR, AUDIT_FAILURES)
# The columns naming a user: a row belongs to every user one of them names (and to the user of its `pk`).
USER_ID_COLUMNS: tuple[str, ...] = ("user_id", "other_user_id")


@dataclass(frozen=True)
class PurgeCounts:
    """Rows deleted and files rewritten, per table."""

    rows: Mapping[str, int]
    files_rewritten: Mapping[str, int]

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def _predicate(columns: set[str], ids: list[str]) -> str | None:
    listed = ", ".join(literal(u) for u in ids)
    clauses = [f"{column} IN ({listed})" for column in USER_ID_COLUMNS if column in columns]
    if "pk" in columns:
        clauses.append(f"pk IN ({', '.join(literal(USER_PK_PREFIX + u) for u in ids)})")
    return " OR ".join(clauses) or None


def purge_users(lake: Lake, user_ids: Iterable[str]) -> PurgeCounts:
    """Delete every row of `user_ids` from every table and erase them from the tables' logs and removed
    files (see the module's docstring)."""
    ids = sorted(set(user_ids))
    rows: dict[str, int] = dict.fromkeys(PURGED_DATASETS, 0)
    files: dict[str, int] = dict.fromkeys(PURGED_DATASETS, 0)
    if not ids:
        return PurgeCounts(rows, files)
    for name in PURGED_DATASETS:
        table = open_table(lake, name)
        if table is None:
            continue
        predicate = _predicate(set(table_schema_names(table)), ids)
        if predicate is None:
            continue
        rows[name], files[name] = delete_rows(lake, name, predicate)
        expunge(lake, name)
    logger.info("purge done", extra={"rows": sum(rows.values()), "files": sum(files.values())})
    return PurgeCounts(rows, files)

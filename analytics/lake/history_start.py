"""When the lake's history starts: a bootstrap (analytics.bootstrap) lands the table's state at one instant
T; before T the lake holds only the stream changes it saw, not the table's state, nor its history.

T is kept in the `changes` table's own Delta metadata, the `metaData` action's configuration under
`HISTORY_START` (ISO 8601, UTC, milliseconds). There it is read with the table at no cost, survives
checkpoints, compaction and an erasure's expunge (which deletes old log entries, and with them every
commit's `commitInfo`: a commit's metadata would not), and every Delta reader shows it (delta-rs
`metadata().configuration`, Spark's `SHOW TBLPROPERTIES`). It names no table, item or user.

A lake bootstrapped twice keeps the earlier T: the stream consumed since it keeps the state complete.
"""

from __future__ import annotations

__all__ = ["HISTORY_START", "HistoryStartsLater", "history_start", "record_history_start"]

from datetime import UTC, datetime

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from analytics.lake._delta import open_table, restrict_commit
from analytics.lake._errors import NoDataAsOf
from analytics.lake._files import ensure_layout
from analytics.lake._filesystem import Lake
from analytics.lake._schema import CHANGES, AllowList

HISTORY_START = "entitlements.historyStartsAt"
_ATTEMPTS = 8


class HistoryStartsLater(NoDataAsOf):
    """`as_of` is before the instant the lake's history starts (a bootstrap's T): the state then would be
    the stream's changes alone, without the table's items."""

    def __init__(self, root: str, as_of: datetime, starts: datetime) -> None:
        self.root = root
        self.as_of = as_of
        self.first = starts
        self.starts = starts
        # Its own line, not NoDataAsOf's "no data ... as of" (there is data then, only not the table's).
        super(NoDataAsOf, self).__init__(
            f"the lake at {root} holds the table's history from {_text(starts)} on (bootstrapped then), "
            f"not as of {_text(as_of)}: give an --as-of at or after {_text(starts)}"
        )


def _text(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def history_start(changes: DeltaTable) -> datetime | None:
    """T, when the lake was bootstrapped (from the `changes` table's metadata), else None."""
    value = changes.metadata().configuration.get(HISTORY_START)
    if not value:
        return None
    return datetime.fromisoformat(value).astimezone(UTC)


def record_history_start(lake: Lake, allow: AllowList, at: datetime) -> datetime:
    """Keep `at` as the lake's history start unless an earlier one is kept; returns the one kept.

    One metadata commit on the `changes` table (created first if missing), tried again on the newest
    version when it loses to a concurrent commit; a consumer's append that loses to it commits again
    on the new version (`analytics.lake._delta.append`)."""
    wanted = at.astimezone(UTC).replace(microsecond=at.microsecond // 1000 * 1000)
    table: DeltaTable | None = ensure_layout(lake, allow)[CHANGES]
    for attempt in range(_ATTEMPTS):
        assert table is not None
        kept = history_start(table)
        if kept is not None and kept <= wanted:
            return kept
        try:
            table.alter.set_table_properties({HISTORY_START: _text(wanted)}, raise_if_not_exists=False)
        except DeltaError:
            if attempt == _ATTEMPTS - 1:
                raise
            table = open_table(lake, CHANGES)
            continue
        restrict_commit(lake, CHANGES, table.version())
        return wanted
    raise AssertionError("unreachable")  # pragma: no cover

"""What every read of the lake checks first, without writing anything: the lake is there and holds data
(else `LakeMissing`), and an as-of instant is not before its first change (else `NoDataAsOf`) nor before
the instant its history starts when it was bootstrapped (else `HistoryStartsLater`)."""

from __future__ import annotations

__all__ = ["first_change_at", "require_as_of", "require_data", "require_reachable"]

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from analytics.lake._delta import LOG_DIR, active_files, open_table
from analytics.lake._errors import LakeMissing, LakeUnreachable, NoDataAsOf
from analytics.lake._filesystem import Lake
from analytics.lake._schema import CHANGES, OUTCOMES
from analytics.lake.history_start import HistoryStartsLater, history_start

MIGRATE_HINT = "it holds the old format: run `entitlements lake migrate` to convert it"


def _exists(lake: Lake, relative: str) -> bool:
    return bool(lake.fs.get_file_info(lake.path(relative)).type != pafs.FileType.NotFound)


def _holds_data(table: DeltaTable | None) -> bool:
    """A table that ever committed data (a table only created is at version 0 with no file)."""
    return table is not None and (int(table.version()) > 0 or bool(active_files(table)))


def require_reachable(lake: Lake) -> None:
    """Raises `LakeUnreachable` when an S3 lake's endpoint does not answer one pyarrow request (about a
    second); a local lake passes. delta-rs's object store retries a refused connection for several
    seconds per table it opens, so a command probes first, before its long step, and is refused on one
    line and soon, not after its progress lines."""
    if lake.is_local:
        return
    try:
        lake.fs.get_file_info(lake.path(f"{CHANGES}/{LOG_DIR}"))
    except OSError as error:
        raise LakeUnreachable(lake.uri, lake.storage_options.get("AWS_ENDPOINT_URL")) from error


def require_data(lake: Lake) -> DeltaTable:
    """The `changes` table at its latest version. Raises `LakeMissing` when the lake has no `changes`
    table or neither `changes` nor `outcomes` ever committed data (nothing ran that fills a lake)."""
    require_reachable(lake)
    try:
        changes = open_table(lake, CHANGES)
    except (OSError, DeltaError) as error:  # delta-rs's object store: endpoint down, bucket refused
        raise LakeUnreachable(lake.uri, lake.storage_options.get("AWS_ENDPOINT_URL")) from error
    if changes is None:
        if _exists(lake, CHANGES) and not _exists(lake, f"{CHANGES}/{LOG_DIR}"):
            raise LakeMissing(lake.uri, reason="not in the Delta format", hint=MIGRATE_HINT)
        raise LakeMissing(lake.uri)
    if not _holds_data(changes) and not _holds_data(open_table(lake, OUTCOMES)):
        raise LakeMissing(lake.uri, reason="empty (no commit of data yet)")
    return changes


def first_change_at(changes: DeltaTable) -> datetime | None:
    """The earliest stream creation time among the table's current rows, from its file statistics
    (no data read); None when no file holds a row."""
    actions = pa.table(changes.get_add_actions(flatten=True))
    if not actions.num_rows or "min.created_at" not in actions.column_names:
        return None
    values = [v for v in actions["min.created_at"].to_pylist() if v is not None]
    if not values:
        return None
    first = min(values)
    if not isinstance(first, datetime):
        return None
    return first.replace(tzinfo=UTC) if first.tzinfo is None else first.astimezone(UTC)


def require_as_of(lake: Lake, as_of: datetime) -> DeltaTable:
    """`require_data`, and `NoDataAsOf` when `as_of` is before the lake's first change, or
    `HistoryStartsLater` when it is before a bootstrap's T (the state then lacks the table's items)."""
    changes = require_data(lake)
    starts = history_start(changes)
    if starts is not None and as_of.astimezone(UTC) < starts:
        raise HistoryStartsLater(lake.uri, as_of.astimezone(UTC), starts)
    first = first_change_at(changes)
    if first is None or as_of.astimezone(UTC) < first:
        raise NoDataAsOf(lake.uri, as_of.astimezone(UTC), first)
    return changes

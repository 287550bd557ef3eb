"""Loading a past version of a table (time travel), with one clear error when the log no longer has it.

An erasure ends time travel across it (`analytics.lake.purge`: its clean-up deletes every log entry
before its checkpoint, since they name the erased), and the log's retention (30 days) does the same for
old versions. delta-rs then answers "No files in log segment" (as `TableNotFoundError`) about a table
that exists; `load_version` says instead which version was asked, that an erasure or the retention
removed it, and the oldest version still readable.
"""

from __future__ import annotations

__all__ = ["VersionRemoved", "load_version", "oldest_version"]

import re
from datetime import datetime

import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from analytics.lake._filesystem import Lake
from analytics.lake._traces import LOG_DIR
from schema.errors import TerminalError

_ENTRY = re.compile(r"\A(\d{20})\.(json|checkpoint(\.\d+\.\d+)?\.parquet)\Z")


class VersionRemoved(TerminalError):
    """A version (or an instant) of a table that its log no longer holds, or never held."""

    def __init__(
        self, root: str, table: str, wanted: int | datetime, oldest: int | None, latest: int
    ) -> None:
        self.table = table
        self.wanted = wanted
        asked = (
            f"version {wanted}"
            if isinstance(wanted, int)
            else f"the version as of {wanted.isoformat().replace('+00:00', 'Z')}"
        )
        if isinstance(wanted, int) and not 0 <= wanted <= latest:
            reason = f"its latest version is {latest}"
        elif oldest == 0:  # the whole log is there: an instant before the table's first commit
            reason = "its first version was committed after it"
        else:
            since = f"; the oldest version still readable is {oldest}" if oldest is not None else ""
            reason = f"an erasure or the log's retention removed it{since}"
        super().__init__(f"table {table} of the lake at {root} has no {asked}: {reason}")


def oldest_version(lake: Lake, name: str) -> int | None:
    """The oldest version the table's log can still load: its oldest checkpoint, or its oldest entry
    when it has no checkpoint."""
    selector = pafs.FileSelector(lake.path(f"{name}/{LOG_DIR}"), allow_not_found=True)
    entries: list[int] = []
    checkpoints: list[int] = []
    for info in lake.fs.get_file_info(selector):
        match = _ENTRY.match(info.base_name)
        if match:
            (checkpoints if match.group(2) != "json" else entries).append(int(match.group(1)))
    if checkpoints:
        return min(checkpoints)
    return min(entries) if entries else None


def load_version(lake: Lake, name: str, table: DeltaTable, version: int | datetime) -> None:
    """`table.load_as_version(version)`; raises `VersionRemoved` when the log does not hold it."""
    latest = int(table.version())
    try:
        table.load_as_version(version)
    except (TableNotFoundError, DeltaError) as error:
        if isinstance(version, int) and 0 <= version <= latest and not isinstance(error, TableNotFoundError):
            raise  # a version the log holds that failed to load: not this error's case
        raise VersionRemoved(lake.uri, name, version, oldest_version(lake, name), latest) from None

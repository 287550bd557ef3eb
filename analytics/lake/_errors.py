"""What a read of the lake raises when there is nothing to read. A read never creates a lake: a missing
root, a missing `changes` table or tables that hold no commit of data are an error naming the lake's
path and the command that fills it, never an empty answer.

    TerminalError
      LakeMissing   no lake at the path, or its tables hold no data yet
      TableLogMissing  a Delta table's data files are there but its `_delta_log` is not (refused, not
                    taken for the old format: a migration would publish an empty table over them)
      LakeUnreachable  the lake's storage did not answer (an S3 endpoint down, a bucket refused)
      NoDataAsOf    an `--as-of` instant before the lake's first change
      QueryRefused  a query over the views that is not one read (`entitlements sql` is read-only)
      QueryFailed   DuckDB could not run a query over the views

Messages name the lake's root (a path or `s3://bucket/prefix`) and an instant, never a value of a row.
"""

from __future__ import annotations

__all__ = [
    "FILL_COMMANDS",
    "LakeMissing",
    "LakeUnreachable",
    "NoDataAsOf",
    "QueryFailed",
    "QueryRefused",
    "TableLogMissing",
]

from datetime import datetime

from schema.errors import TerminalError

FILL_COMMANDS = "run `entitlements consume` (or `entitlements demo`) to fill it"


class LakeMissing(TerminalError):
    """No lake at `root`, or its tables hold no data: a read has nothing to answer from."""

    def __init__(self, root: str, *, reason: str = "not found", hint: str = FILL_COMMANDS) -> None:
        self.root = root
        super().__init__(f"lake {reason} at {root}: {hint}")


class LakeUnreachable(TerminalError):
    """The lake's storage could not be read (delta-rs's object store gave up: endpoint down, bucket
    missing, access refused). Names the lake and the endpoint, never a credential."""

    def __init__(self, root: str, endpoint: str | None) -> None:
        self.root = root
        where = f" on the S3 endpoint {endpoint}" if endpoint else ""
        super().__init__(
            f"cannot read the lake at {root}{where}: check ENTITLEMENTS_LAKE__ROOT and "
            "ENTITLEMENTS_AWS__ENDPOINT_URL (or ENTITLEMENTS_AWS__S3_ENDPOINT) and the credentials, "
            "or start the local stack with `entitlements local up`"
        )


class NoDataAsOf(TerminalError):
    """`as_of` is before the first change the lake holds (stream creation time)."""

    def __init__(self, root: str, as_of: datetime, first: datetime | None) -> None:
        self.root = root
        self.as_of = as_of
        self.first = first
        since = f" (its first change is at {_instant(first)})" if first is not None else ""
        super().__init__(
            f"no data in the lake at {root} as of {_instant(as_of)}{since}: "
            f"give a later --as-of, or {FILL_COMMANDS}"
        )


class TableLogMissing(TerminalError):
    """Tables of the lake hold Delta data files (`part-*`) but no `_delta_log` commit: the log was lost.
    Nothing can tell which of the files were live, so nothing is done; the message names the tables."""

    def __init__(self, root: str, tables: list[str]) -> None:
        self.root = root
        self.tables = tables
        super().__init__(
            f"the lake at {root} has Delta data files but no _delta_log in {', '.join(tables)}: "
            "restore each _delta_log folder from a backup (nothing was changed)"
        )


class QueryRefused(TerminalError):
    """A query that is not one read-only statement (a SELECT, or an EXPLAIN of one)."""


class QueryFailed(TerminalError):
    """DuckDB refused or failed a query over the views (the message is DuckDB's for a parse, bind or
    catalog error, which quotes only the query; for any other, its class alone: it can quote values)."""


def _instant(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")

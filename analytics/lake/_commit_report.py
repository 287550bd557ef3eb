"""What a flush's commit answers (`CommitReport`) and what commits one (`Commits`), apart from the
committer itself (`analytics.lake._commits.TableCommits`): a KCL child's landing handler commits
through its worker's writer, so it imports this and never the planner (delta-rs, pyarrow.dataset and
the pandas that comes with it: most of a child's start-up, paid by every child a restart starts)."""

from __future__ import annotations

__all__ = ["CommitReport", "Commits", "Pending"]

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from analytics.lake._rows import PendingFile

# One flush: each table's pending parts, in the order the tables are committed.
Pending = Sequence[tuple[str, list[PendingFile]]]


@dataclass(frozen=True, slots=True)
class CommitReport:
    """What a flush's commits did. `failed` is the first table whose commit failed and `error` its
    error's class name (no message: it can carry data); the tables after it were not tried."""

    committed: tuple[str, ...] = ()
    failed: str | None = None
    error: str | None = None
    commits: int = 0
    rows_written: int = 0
    replays_dropped: int = 0

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> CommitReport:
        values = json.loads(data)
        return cls(**{**values, "committed": tuple(values["committed"])})


class Commits(Protocol):
    """Where a landing handler's flush is committed."""

    def commit(self, pending: Pending) -> CommitReport: ...

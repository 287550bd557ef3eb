"""What the erasure needs from the lake, as a Protocol: processors never import analytics (CONTRIBUTING),
so `entitlements.compose` hands the worker `analytics.AnalyticsLakeEraser`, over the lake's own API."""

from __future__ import annotations

__all__ = ["LakeEraser", "LakeTableScan"]

from collections.abc import Collection, Mapping
from typing import Protocol


class LakeTableScan(Protocol):
    """One lake table's scan for a batch of users: files read, and how many of them hold each user."""

    @property
    def files_scanned(self) -> int: ...

    def traces_of(self, user_id: str) -> int: ...


class LakeEraser(Protocol):
    def mask(self, user_ids: Collection[str]) -> None:
        """Hide these users from every view at once, before their rows are purged. Idempotent."""
        ...

    def purge(self, user_ids: Collection[str]) -> Mapping[str, Mapping[str, int]]:
        """Delete every row of these users from every dataset, rewriting only the files that hold one
        (one rewrite per file for the whole batch). Returns, per user, the rows of theirs deleted from
        each dataset (datasets with none may be omitted). Idempotent."""
        ...

    def unmask(self, user_ids: Collection[str]) -> None:
        """Forget these users in the mask once both passes have purged them: the mask holds user ids, so
        it must not keep them; the landing filter keeps their events out from then on."""
        ...

    def holds(self, user_id: str) -> bool | None:
        """Whether any dataset holds a row of this user; None when a part of the lake cannot be read."""
        ...

    def traces_for(
        self, user_ids: Collection[str], *, until: float | None = None
    ) -> Mapping[str, LakeTableScan | None]:
        """Per purged table, the same scan as `holds` (every file under its folder) made once for the
        whole batch, for the receipts' verifier; None for a table a file of which cannot be read.
        Raises `TimeoutError` once `until` (a `time.monotonic()` instant) passes."""
        ...

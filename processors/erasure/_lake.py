"""What the erasure needs from the lake, as a Protocol: processors never import analytics (CONTRIBUTING),
so `entitlements` hands the worker an adapter over the lake's own API (`entitlements.erasure_lake`)."""

from __future__ import annotations

__all__ = ["LakeEraser", "LakeTableScan"]

from collections.abc import Collection, Mapping
from typing import Protocol


class LakeTableScan(Protocol):
    """One lake table's scan for one user: files read, and how many of them hold the user."""

    @property
    def files_scanned(self) -> int: ...

    @property
    def traces(self) -> int: ...


class LakeEraser(Protocol):
    def mask(self, user_ids: Collection[str]) -> None:
        """Hide these users from every view at once, before their rows are purged. Idempotent."""
        ...

    def purge(self, user_ids: Collection[str]) -> int:
        """Delete every row of these users from every dataset, rewriting only the files that hold one
        (one rewrite per file for the whole batch). Returns the rows deleted. Idempotent."""
        ...

    def unmask(self, user_ids: Collection[str]) -> None:
        """Forget these users in the mask once both passes have purged them: the mask holds user ids, so
        it must not keep them; the landing filter keeps their events out from then on."""
        ...

    def holds(self, user_id: str) -> bool | None:
        """Whether any dataset holds a row of this user; None when a part of the lake cannot be read."""
        ...

    def traces(self, user_id: str) -> Mapping[str, LakeTableScan | None]:
        """Per purged table, the same scan as `holds` (every file under its folder), for a receipt's
        verifier; None for a table a file of which cannot be read."""
        ...

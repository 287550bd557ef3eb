"""What the erasure needs from the lake, as a Protocol: processors never import analytics (CONTRIBUTING),
so `entitlements` hands the worker an adapter over the lake's own API (`entitlements.erasure_lake`)."""

from __future__ import annotations

__all__ = ["LakeEraser"]

from collections.abc import Collection
from typing import Protocol


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

"""The safety valve on Array deletes (`config.CleanupSettings`, docs/operations/cleanup.md): a shadow
mode that sends none, and a budget of deletes in any rolling hour.

The budget is this process's: each KCL child of `entitlements consume` and each retry worker keeps its
own count (a fleet-wide budget would need a shared counter, which the table's conditional writes could
hold; not built). A delete is counted when it is about to be sent, whatever Array answers: a 404 or a
failure used the budget too, as a request that may have deleted.
"""

from __future__ import annotations

__all__ = ["DeleteValve"]

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from config import CleanupSettings

logger = logging.getLogger(__name__)

_HOUR_SECONDS = 3600.0


class DeleteValve:
    """`shadow`: send no delete. `take()`: whether one more delete may be sent now (counted if so)."""

    def __init__(
        self,
        *,
        shadow: bool = False,
        budget_per_hour: int | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if budget_per_hour is not None and budget_per_hour < 1:
            raise ValueError("the delete budget must be at least 1 an hour")
        self.shadow = shadow
        self.budget_per_hour = budget_per_hour
        self._monotonic = monotonic
        self._sent: deque[float] = deque()  # `monotonic` instants of the deletes of the last hour
        self._lock = threading.Lock()  # a flush attempts its cleanups on several threads

    @classmethod
    def from_settings(cls, settings: CleanupSettings) -> DeleteValve:
        """The valve a process runs with, said once in its log: a shadow run or a budget is an
        operator's choice that should never pass unseen."""
        if settings.mode == "shadow" or settings.delete_budget_per_hour is not None:
            logger.info(
                "cleanup delete valve",
                extra={"mode": settings.mode, "delete_budget_per_hour": settings.delete_budget_per_hour},
            )
        return cls(shadow=settings.mode == "shadow", budget_per_hour=settings.delete_budget_per_hour)

    def take(self) -> bool:
        if self.budget_per_hour is None:
            return True
        now = self._monotonic()
        with self._lock:
            while self._sent and self._sent[0] <= now - _HOUR_SECONDS:
                self._sent.popleft()
            if len(self._sent) >= self.budget_per_hour:
                return False
            self._sent.append(now)
            return True

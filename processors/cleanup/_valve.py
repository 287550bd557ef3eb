"""The safety valve on Array deletes (`config.CleanupSettings`, docs/operations/cleanup.md): a shadow
mode that sends none, and a budget of deletes in any rolling hour.

The budget's scope is a setting. `process`: each KCL child of `entitlements consume` and each retry
worker keeps its own count in memory. `host`: every process on the host with the same state folder
(consume's children, and a retry worker given the same `ENTITLEMENTS_CONSUMER__STATE_DIR`) shares one
count, kept in a file there under an exclusive lock (`fcntl.flock`). A fleet-wide budget across hosts
would need a shared counter elsewhere (the table's conditional writes could hold one); not built. A
delete is counted when it is about to be sent, whatever Array answers: a 404 or a failure used the
budget too, as a request that may have deleted.
"""

from __future__ import annotations

__all__ = ["BUDGET_FILE_NAME", "DeleteValve"]

import fcntl
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from config import CleanupSettings

logger = logging.getLogger(__name__)

_HOUR_SECONDS = 3600.0
# Under the state folder: the epoch seconds of the shared budget's deletes of the last hour, one a line
# (times only: no account, no user).
BUDGET_FILE_NAME = "cleanup-delete-budget"


class DeleteValve:
    """`shadow`: send no delete. `take()`: whether one more delete may be sent now (counted if so)."""

    def __init__(
        self,
        *,
        shadow: bool = False,
        budget_per_hour: int | None = None,
        shared_file: Path | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if budget_per_hour is not None and budget_per_hour < 1:
            raise ValueError("the delete budget must be at least 1 an hour")
        self.shadow = shadow
        self.budget_per_hour = budget_per_hour
        self.shared_file = shared_file
        self._monotonic = monotonic
        self._wall = wall  # the shared file's clock: monotonic instants mean nothing in another process
        self._sent: deque[float] = deque()  # `monotonic` instants of the deletes of the last hour
        self._lock = threading.Lock()  # a flush attempts its cleanups on several threads

    @classmethod
    def from_settings(cls, settings: CleanupSettings, *, state_dir: Path | None = None) -> DeleteValve:
        """The valve a process runs with, said once in its log: a shadow run or a budget is an
        operator's choice that should never pass unseen. `state_dir` holds a `host`-scoped budget."""
        shared: Path | None = None
        if settings.delete_budget_per_hour is not None and settings.delete_budget_scope == "host":
            if state_dir is None:
                raise ValueError("a host-wide delete budget needs the state folder")
            shared = state_dir / BUDGET_FILE_NAME
        if settings.mode == "shadow" or settings.delete_budget_per_hour is not None:
            logger.info(
                "cleanup delete valve",
                extra={
                    "mode": settings.mode,
                    "delete_budget_per_hour": settings.delete_budget_per_hour,
                    "delete_budget_scope": settings.delete_budget_scope,
                },
            )
        return cls(
            shadow=settings.mode == "shadow",
            budget_per_hour=settings.delete_budget_per_hour,
            shared_file=shared,
        )

    def take(self) -> bool:
        if self.budget_per_hour is None:
            return True
        if self.shared_file is not None:
            return self._take_shared(self.budget_per_hour, self.shared_file)
        now = self._monotonic()
        with self._lock:
            while self._sent and self._sent[0] <= now - _HOUR_SECONDS:
                self._sent.popleft()
            if len(self._sent) >= self.budget_per_hour:
                return False
            self._sent.append(now)
            return True

    def _take_shared(self, budget: int, path: Path) -> bool:
        """One read-decide-write under an exclusive lock on the file, so that processes sharing it never
        both take the last delete. A file that cannot be used refuses the delete (the work parks and
        is retried): never a delete past a budget nobody could count."""
        now = self._wall()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock, path.open("a+", encoding="ascii") as shared:
                fcntl.flock(shared, fcntl.LOCK_EX)  # released when the file closes
                shared.seek(0)
                recent = [t for t in _instants(shared.read()) if t > now - _HOUR_SECONDS]
                allowed = len(recent) < budget
                if allowed:
                    recent.append(now)
                shared.seek(0)
                shared.truncate()
                shared.write("".join(f"{t:.3f}\n" for t in recent))
                shared.flush()
                return allowed
        except OSError as failed:
            logger.warning("cleanup delete budget file unusable", extra={"code": type(failed).__name__})
            return False


def _instants(text: str) -> list[float]:
    instants: list[float] = []
    for line in text.splitlines():
        try:
            instants.append(float(line))
        except ValueError:
            continue  # a torn or foreign line counts as nothing
    return instants

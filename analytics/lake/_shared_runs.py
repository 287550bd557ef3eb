"""Work shared by the calls that overlap it: a call made while a run is going waits for the next run,
which begins after every call waiting meanwhile and does the work for all of their ids at once. For
work whose cost is per table or per file, not per id (the eraser's purges and verifier scans), so
concurrent batches fold into one run instead of queueing one each.

Only a run that began after the call answers it. Given deadlines (`time.monotonic()` instants), a run
is bounded by the latest of its callers' (None if any caller has none), and a caller whose own
deadline passes while it waits stops with `TimeoutError`. A run's failure is raised to every call it
served."""

from __future__ import annotations

__all__ = ["SharedRuns"]

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")

# A caller waits for at most the run after the one going when it asked: older answers can go.
_KEPT_ANSWERS = 16


@dataclass
class SharedRuns(Generic[T]):
    """Runs of `work(ids, until)` shared by overlapping calls of `shared` (module docstring)."""

    work: Callable[[Collection[str], float | None], T]
    _lock: threading.Condition = field(default_factory=threading.Condition)
    _pending: set[str] = field(default_factory=set)
    _until: float | None = None
    _bounded: bool = True  # every pending call has a deadline
    _started: int = 0
    _finished: int = 0
    _running: bool = False
    _waiting: int = 0
    _outcomes: dict[int, T | Exception] = field(default_factory=dict)

    def waiting(self) -> int:
        """How many calls wait for the running one (for tests)."""
        with self._lock:
            return self._waiting

    def shared(self, ids: frozenset[str], until: float | None = None) -> T:
        with self._lock:
            self._pending |= ids
            if until is None:
                self._bounded = False
            elif self._until is None or until > self._until:
                self._until = until
            mine = self._started + 1  # the next run to begin does these ids
            while self._finished < mine:
                if self._running:
                    left = None if until is None else until - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError("the shared run ran out of this call's time")
                    self._waiting += 1
                    self._lock.wait(left)
                    self._waiting -= 1
                    continue
                self._run()
            outcome = self._outcomes[mine]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _run(self) -> None:
        """One run for every pending id, the lock released while it works (called holding it)."""
        self._running = True
        self._started += 1
        number, ids = self._started, self._pending
        bound = self._until if self._bounded else None
        self._pending, self._until, self._bounded = set(), None, True
        self._lock.release()
        try:
            outcome: T | Exception = self.work(ids, bound)
        except Exception as error:  # handed to every call that shared this run
            outcome = error
        finally:
            self._lock.acquire()
        self._outcomes[number] = outcome
        self._finished, self._running = number, False
        for old in [n for n in self._outcomes if n < number - _KEPT_ANSWERS]:
            del self._outcomes[old]
        self._lock.notify_all()

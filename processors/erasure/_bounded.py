"""Time bounds: the handler timeout (a deadline per received batch, so per message) and the batch
timeout (the client-side limit on one destructive call).

`Deadline.budget(cap)` is what the next call may take: the smaller of `cap` and what is left of the
handler timeout; a step that would start with no time left raises `ErasureTimeoutError` instead.
`BoundedCalls.call` runs a call on a worker thread and waits at most its budget: a call that outlives it
is abandoned (it cannot be stopped), its result ignored, and the step fails so the message is
redelivered. Every step is idempotent, so an abandoned call finishing late is harmless.
"""

from __future__ import annotations

__all__ = ["BoundedCalls", "Deadline", "Parallel"]

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from processors.erasure._errors import ErasureTimeoutError

_T = TypeVar("_T")
_I = TypeVar("_I")

# A call is not started with less time than this left.
MIN_CALL_SECONDS = 0.02


class Deadline:
    def __init__(self, seconds: float, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self.at = monotonic() + seconds

    def remaining(self) -> float:
        return self.at - self._monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def budget(self, step: str, cap: float) -> float:
        """Seconds the next call of `step` may take, at most `cap`; raises when none are left."""
        remaining = self.remaining()
        if remaining < MIN_CALL_SECONDS:
            raise ErasureTimeoutError(step)
        return min(cap, remaining)

    def monotonic_at(self, step: str, cap: float) -> float:
        """The `time.monotonic()` instant the next call of `step` must finish by."""
        return self._monotonic() + self.budget(step, cap)


class BoundedCalls:
    """Runs calls on a small thread pool, waiting at most each call's budget."""

    def __init__(self, max_workers: int = 8) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="erasure-call")

    def call(self, step: str, fn: Callable[[], _T], deadline: Deadline, cap: float) -> _T:
        """`fn()`, or `ErasureTimeoutError(step)` when it takes longer than `deadline.budget(step, cap)`.
        Errors raised by `fn` pass through unchanged."""
        timeout = deadline.budget(step, cap)
        future = self._pool.submit(fn)
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            future.cancel()
            raise ErasureTimeoutError(step) from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> BoundedCalls:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Parallel:
    """Runs one function over several items at once (each account of a batch, each message's finish).
    The function must not raise: it returns its own error. Tasks may make `BoundedCalls` calls (a
    separate pool), so the two pools never wait on each other."""

    def __init__(self, max_workers: int) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="erasure-task")

    def map(self, fn: Callable[[_I], _T], items: Sequence[_I]) -> list[_T]:
        if len(items) <= 1:
            return [fn(item) for item in items]
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

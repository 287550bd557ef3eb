"""Bounded retries with full-jitter exponential backoff for every downstream call (tenacity): the HTTP
edge's calls and the service's DynamoDB calls.

Only `RetryableError`s are retried (or the narrower class a caller names), the last one re-raised. A
failure that carries `retry_after` (a numeric Retry-After) waits at least that long, never past
`max_seconds`. With a `deadline` (a `monotonic()` instant) no attempt starts when it could not get
`MIN_ATTEMPT_SECONDS` before it.
"""

from __future__ import annotations

__all__ = ["MIN_ATTEMPT_SECONDS", "RetryPolicy"]

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_random_exponential

from config import ArraySettings, ServiceSettings
from schema.errors import RetryableError

# An attempt is not started with less time than this left before the deadline.
MIN_ATTEMPT_SECONDS = 0.05

# Array's delete-user backoff (the cleanup's calls): a flush has seconds to spare, a route does not.
_ARRAY_BACKOFF_BASE_SECONDS = 0.1
_ARRAY_BACKOFF_MAX_SECONDS = 2.0


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all, full-jitter exponential backoff (`base_seconds` doubling, capped at
    `max_seconds`) between them."""

    attempts: int = 3
    base_seconds: float = 0.05
    max_seconds: float = 1.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    monotonic: Callable[[], float] = field(default=time.monotonic, compare=False)

    @classmethod
    def from_settings(cls, settings: ServiceSettings) -> RetryPolicy:
        """The service's calls (a route or a relinker job waits on them)."""
        return cls(settings.max_attempts, settings.backoff_base_seconds, settings.backoff_max_seconds)

    @classmethod
    def for_array_deletes(cls, settings: ArraySettings) -> RetryPolicy:
        """The cleanup's and the erasure's delete-user calls (bounded by their caller's deadline too)."""
        return cls(settings.max_attempts, _ARRAY_BACKOFF_BASE_SECONDS, _ARRAY_BACKOFF_MAX_SECONDS)

    def retrying(
        self, *, retry_on: type[BaseException] = RetryableError, deadline: float | None = None
    ) -> Retrying:
        jitter = wait_random_exponential(multiplier=self.base_seconds, max=self.max_seconds)

        def wait(state: RetryCallState) -> float:
            seconds = float(jitter(state))
            failure = state.outcome.exception() if state.outcome is not None else None
            retry_after = getattr(failure, "retry_after", None)
            if isinstance(retry_after, int | float):
                return min(max(seconds, float(retry_after)), self.max_seconds)
            return seconds

        def stop(state: RetryCallState) -> bool:
            if state.attempt_number >= self.attempts:
                return True
            if deadline is None:
                return False
            return self.monotonic() + state.upcoming_sleep + MIN_ATTEMPT_SECONDS >= deadline

        return Retrying(
            retry=retry_if_exception_type(retry_on), wait=wait, stop=stop, sleep=self.sleep, reraise=True
        )

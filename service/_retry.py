"""Bounded retries with backoff for the service's downstream calls (tenacity)."""

from __future__ import annotations

__all__ = ["RetryPolicy"]

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from config import ServiceSettings
from schema.errors import RetryableError


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all, full-jitter exponential backoff between them; only `RetryableError`s
    are retried, and the last one is re-raised."""

    attempts: int = 3
    base_seconds: float = 0.05
    max_seconds: float = 1.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    @classmethod
    def from_settings(cls, settings: ServiceSettings) -> RetryPolicy:
        return cls(settings.max_attempts, settings.backoff_base_seconds, settings.backoff_max_seconds)

    def retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type(RetryableError),
            stop=stop_after_attempt(self.attempts),
            wait=wait_random_exponential(multiplier=self.base_seconds, max=self.max_seconds),
            sleep=self.sleep,
            reraise=True,
        )

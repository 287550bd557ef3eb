"""processors/cleanup/_errors.py: each error's class says retry or not, and its code is machine text."""

from __future__ import annotations

from processors.cleanup._errors import GuardUnavailableError, RetryQueueError
from schema.errors import FlushIncomplete, RetryableError


def test_an_unreadable_guard_is_retryable_so_the_cleanup_parks_instead_of_deleting() -> None:
    assert isinstance(GuardUnavailableError("ThrottlingException"), RetryableError)


def test_a_retry_queue_that_hangs_asks_the_consumer_to_park_at_once() -> None:
    error = RetryQueueError("ReadTimeoutError", park_now=True)
    assert (isinstance(error, FlushIncomplete), error.park_now, error.code) == (
        True,
        True,
        "ReadTimeoutError",
    )

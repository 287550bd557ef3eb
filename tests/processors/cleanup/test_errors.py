"""processors/cleanup/_errors.py: each error's class says retry or not, and its code is machine text."""

from __future__ import annotations

from processors.cleanup._errors import (
    ArrayCredentialError,
    ArrayRequestRejected,
    ArrayTransientError,
    GuardUnavailableError,
    RetryQueueError,
)
from schema.errors import FlushIncomplete, RetryableError, TerminalError


def test_refused_credentials_park_the_cleanup_and_carry_the_status_as_code() -> None:
    error = ArrayCredentialError(403)
    assert (isinstance(error, RetryableError), error.code) == (True, "403")


def test_a_rejected_request_is_terminal() -> None:
    assert isinstance(ArrayRequestRejected(400), TerminalError)


def test_a_transient_failure_says_whether_the_delete_may_have_been_applied() -> None:
    error = ArrayTransientError("ReadTimeout", attempts=3, unanswered=True)
    assert (isinstance(error, RetryableError), error.unanswered, error.attempts) == (True, True, 3)


def test_an_unreadable_guard_is_retryable_so_the_cleanup_parks_instead_of_deleting() -> None:
    assert isinstance(GuardUnavailableError("ThrottlingException"), RetryableError)


def test_a_retry_queue_that_hangs_asks_the_consumer_to_park_at_once() -> None:
    error = RetryQueueError("ReadTimeoutError", park_now=True)
    assert (isinstance(error, FlushIncomplete), error.park_now, error.code) == (
        True,
        True,
        "ReadTimeoutError",
    )

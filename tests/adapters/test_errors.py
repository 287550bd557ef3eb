"""adapters/errors.py: each error's class says retry or not, its code is machine text, and httpx's failures
and statuses are read once (transient or not, and whether the request may have been applied unseen)."""

from __future__ import annotations

import httpx
import pytest

from adapters.errors import (
    ArrayCredentialError,
    ArrayRequestRejected,
    ArrayTransientError,
    DownstreamErrors,
    DownstreamNotFoundError,
    DownstreamRefusedError,
    DownstreamUnavailableError,
    transient_from_status,
    transient_from_transport,
)
from schema.errors import RetryableError, TerminalError


def test_refused_credentials_park_the_cleanup_and_carry_the_status_as_code() -> None:
    error = ArrayCredentialError(403)
    assert (isinstance(error, RetryableError), error.code) == (True, "403")


def test_a_rejected_request_is_terminal() -> None:
    assert isinstance(ArrayRequestRejected(400), TerminalError)


def test_a_transient_failure_says_whether_the_delete_may_have_been_applied() -> None:
    error = ArrayTransientError("ReadTimeout", attempts=3, unanswered=True)
    assert (isinstance(error, RetryableError), error.unanswered, error.attempts) == (True, True, 3)


def test_a_service_call_that_ran_out_of_retries_is_retryable_with_its_code() -> None:
    error = DownstreamErrors().unavailable("array unavailable (503)", "array_unavailable")
    assert (isinstance(error, DownstreamUnavailableError), isinstance(error, RetryableError)) == (True, True)


def test_a_not_found_answer_is_a_terminal_refusal() -> None:
    error = DownstreamErrors().not_found("the user has no primary account", "no_primary_account")
    assert (isinstance(error, DownstreamNotFoundError), isinstance(error, DownstreamRefusedError)) == (
        True,
        True,
    )
    assert isinstance(error, TerminalError)


def _request() -> httpx.Request:
    return httpx.Request("GET", "http://127.0.0.1:9/")


@pytest.mark.parametrize(
    ("failure", "code", "unanswered"),
    [
        (httpx.ConnectTimeout("t", request=_request()), "timeout", False),
        (httpx.ReadTimeout("t", request=_request()), "timeout", True),
        (httpx.ConnectError("c", request=_request()), "ConnectError", False),
        (httpx.RemoteProtocolError("r", request=_request()), "RemoteProtocolError", True),
    ],
)
def test_a_network_fault_is_transient_and_says_whether_the_request_may_have_arrived(
    failure: httpx.TransportError, code: str, unanswered: bool
) -> None:
    transient = transient_from_transport(failure)
    assert (transient.code, transient.unanswered) == (code, unanswered)


def test_a_throttled_answer_is_transient_with_its_numeric_retry_after() -> None:
    transient = transient_from_status(httpx.Response(429, headers={"Retry-After": "0.5"}))
    assert transient is not None
    assert (transient.code, transient.retry_after, transient.unanswered) == ("429", 0.5, False)


def test_a_5xx_is_transient_and_may_have_been_applied() -> None:
    transient = transient_from_status(httpx.Response(503))
    assert transient is not None
    assert (transient.code, transient.unanswered) == ("503", True)


@pytest.mark.parametrize("status", [200, 201, 400, 401, 404, 409])
def test_any_other_status_is_left_to_the_calling_client(status: int) -> None:
    assert transient_from_status(httpx.Response(status)) is None

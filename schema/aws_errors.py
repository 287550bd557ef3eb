"""boto3/botocore errors, converted once into the project's tree (`schema.errors`).

The one reading of an AWS failure, for every part that calls a boto3 client:

- `aws_error_code(error)`: the AWS error code of a botocore error when it is an identifier
  ("ThrottlingException", "AWS.SimpleQueueService.NonExistentQueue"), else the error's class name.
  Never the error's text: a botocore message can quote the request.
- `RETRYABLE_AWS_CODES`: the codes after which the same call may succeed (botocore's standard retry mode's
  throttling and transient codes, and DynamoDB's documented retryable errors).
- `is_retryable_aws_error(error)`: a retryable code, an HTTP 5xx, or a connection fault.
- `cancellation_codes(error)`: DynamoDB's per-item reasons of a cancelled transaction, in the
  transaction's order; `RETRYABLE_CANCELLATION_CODES`: the reasons after which the same transaction may
  pass.
- `converted(operation)`: a context manager re-raising botocore errors as `AwsRetryableError` or
  `AwsTerminalError` (a `RetryableError` / `TerminalError` carrying `operation` and `code`), `from None`.
  A part with its own error type wraps this one (`processors.erasure` turns both into its step error).

    EntitlementsError
    ├── RetryableError ── AwsRetryableError   (throttled, 5xx, connection refused/reset/timed out)
    └── TerminalError ─── AwsTerminalError    (validation, missing resource, credentials, other 4xx)
"""

from __future__ import annotations

__all__ = [
    "RETRYABLE_AWS_CODES",
    "RETRYABLE_CANCELLATION_CODES",
    "AwsRetryableError",
    "AwsTerminalError",
    "aws_error_code",
    "cancellation_codes",
    "converted",
    "is_retryable_aws_error",
]

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from schema.errors import RetryableError, TerminalError

RETRYABLE_AWS_CODES: frozenset[str] = frozenset(
    {
        # throttling (botocore's standard retry mode)
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "PriorRequestNotComplete",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "ThrottledException",
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
        "TransactionInProgressException",
        # transient (botocore's standard retry mode, DynamoDB's and SQS's documented server errors)
        "InternalFailure",
        "InternalServerError",
        "RequestTimeout",
        "RequestTimeoutException",
        "ServiceUnavailable",
    }
)

# DynamoDB's per-item reasons of a TransactionCanceledException after which the same transaction may pass.
RETRYABLE_CANCELLATION_CODES: frozenset[str] = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)

# An AWS error code is an identifier; anything else is reported by the error's class name instead.
_ERROR_CODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def aws_error_code(error: BaseException) -> str:
    """The AWS error code of a botocore error (read from its parsed response), else the error's class
    name: never its text."""
    response = getattr(error, "response", None)
    if isinstance(response, Mapping):
        details = response.get("Error")
        code = details.get("Code") if isinstance(details, Mapping) else None
        if isinstance(code, str) and _ERROR_CODE.fullmatch(code):
            return code
    return type(error).__name__


def cancellation_codes(error: ClientError) -> list[str]:
    """The per-item reason codes of a TransactionCanceledException, in the transaction's order ("None"
    for an item that passed); [] for any other error."""
    reasons = error.response.get("CancellationReasons")
    if not isinstance(reasons, list):
        return []
    return [str(r.get("Code", "None")) if isinstance(r, Mapping) else "None" for r in reasons]


def _status(error: ClientError) -> int:
    metadata = error.response.get("ResponseMetadata")
    status = metadata.get("HTTPStatusCode") if isinstance(metadata, Mapping) else None
    return status if isinstance(status, int) else 0


def is_retryable_aws_error(error: BaseException) -> bool:
    """Whether the same call may succeed later: a retryable code, an HTTP 5xx (or 429), or a connection
    fault (refused, reset, timed out). Parameter validation, credentials and other 4xx: no."""
    if isinstance(error, ClientError):
        status = _status(error)
        return aws_error_code(error) in RETRYABLE_AWS_CODES or status >= 500 or status == 429
    return isinstance(error, BotoConnectionError | HTTPClientError)


class AwsRetryableError(RetryableError):
    """An AWS call failed in a way that may pass on a later try. The message is the operation and code;
    `endpoint` is the address a connection fault could not reach (None otherwise)."""

    def __init__(self, operation: str, code: str, *, endpoint: str | None = None) -> None:
        self.operation = operation
        self.code = code
        self.endpoint = endpoint
        super().__init__(f"{operation} failed: {code}")


class AwsTerminalError(TerminalError):
    """An AWS call failed in a way no retry can help. The message is the operation and code."""

    def __init__(self, operation: str, code: str, *, endpoint: str | None = None) -> None:
        self.operation = operation
        self.code = code
        self.endpoint = endpoint
        super().__init__(f"{operation} failed: {code}")


@contextmanager
def converted(operation: str, *, tolerate: frozenset[str] = frozenset()) -> Iterator[list[str]]:
    """Re-raise botocore errors raised inside as `AwsRetryableError` / `AwsTerminalError`, `from None`.

    Codes in `tolerate` (e.g. `ResourceInUseException` of a create that may find the resource) are
    swallowed and appended to the yielded list instead."""
    tolerated: list[str] = []
    failure: AwsRetryableError | AwsTerminalError | None = None
    try:
        yield tolerated
    except (ClientError, BotoCoreError) as error:
        code = aws_error_code(error)
        if isinstance(error, ClientError) and code in tolerate:
            tolerated.append(code)
            return
        retryable = is_retryable_aws_error(error)
        # A connection fault's address (botocore's `endpoint_url`): where the call could not go.
        endpoint = (getattr(error, "kwargs", None) or {}).get("endpoint_url")
        kind = AwsRetryableError if retryable else AwsTerminalError
        failure = kind(operation, code, endpoint=endpoint if isinstance(endpoint, str) else None)
    if failure is not None:
        raise failure from None

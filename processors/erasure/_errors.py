"""The erasure subscriber's errors. Each carries a short machine `code` (an AWS error code, an HTTP
status, an error class name) and the step it concerns; none holds a body, a key, a user id, a
requestId, an address or the text of an underlying error."""

from __future__ import annotations

__all__ = [
    "ErasureConfigError",
    "ErasureStateError",
    "ErasureStepError",
    "ErasureTimeoutError",
    "aws_error_code",
    "converted",
    "state_files",
]

import errno
from collections.abc import Iterator
from contextlib import contextmanager

from schema import aws_errors
from schema.aws_errors import AwsRetryableError, AwsTerminalError, aws_error_code
from schema.errors import RetryableError, TerminalError


class ErasureConfigError(TerminalError):
    """A setting above its channel cap, or a queue not set up as the contract requires: the worker
    refuses to start. The message names the setting, its value and the cap (never a secret)."""


class ErasureStepError(RetryableError):
    """One step of an erasure or of a holdings check failed; the message is left for SQS to redeliver."""

    def __init__(self, step: str, code: str) -> None:
        self.step = step
        self.code = code
        super().__init__(f"erasure step {step} failed ({code})")


class ErasureStateError(ErasureStepError):
    """A file of the store's state (the erasure ledger, the consumer's quarantine, parked work and dead
    letters) could not be read or written: a full disk, a read-only state directory. Retryable like any
    failed step: the message is left for SQS to redeliver and the worker keeps running. Its code is the
    errno name (`ENOSPC`, `EROFS`), never a path."""


class ErasureTimeoutError(RetryableError):
    """A step would run past the handler timeout, or one call outlasted the batch timeout."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.code = "TIMEOUT"
        super().__init__(f"erasure step {step} ran out of time")


@contextmanager
def converted(step: str) -> Iterator[None]:
    """Convert boto3/botocore errors raised inside into `ErasureStepError(step, code)`, once, where the
    client is called. `from None`: a botocore error's text can quote the request."""
    code: str | None = None
    try:
        with aws_errors.converted(step):
            yield
    except (AwsRetryableError, AwsTerminalError) as error:
        code = error.code
    if code is not None:
        raise ErasureStepError(step, code) from None


@contextmanager
def state_files(step: str) -> Iterator[None]:
    """Convert an `OSError` raised inside (where the state files are read and written) into
    `ErasureStateError(step, errno name)`, once. `from None`: its text names a path."""
    code: str | None = None
    try:
        yield
    except OSError as error:
        code = errno.errorcode.get(error.errno or 0) or type(error).__name__
    if code is not None:
        raise ErasureStateError(step, code) from None

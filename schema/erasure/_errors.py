"""The erasure package's errors, all under the project's one root (`schema.errors`).

None of them ever carries a body, a key, an address, a requestId or the text of an underlying error:
their message is a code (or, for configuration, a variable name, a cap and the refused number).
"""

from __future__ import annotations

__all__ = [
    "ErasureContractError",
    "ErasureContractErrorCode",
    "ErasureEnvironmentError",
    "ErasureResponseSendError",
    "ErasureValueError",
]

from enum import StrEnum

from schema.errors import RetryableError, TerminalError


class ErasureContractErrorCode(StrEnum):
    NOT_JSON = "NOT_JSON"  # the body is not JSON text (as JavaScript's JSON.parse would refuse it)
    INVALID_MESSAGE = "INVALID_MESSAGE"  # JSON, but not a valid message of the contract
    NOT_A_REQUEST = "NOT_A_REQUEST"  # a valid answer where a request was expected


class ErasureContractError(TerminalError):
    """A body or an answer the contract refuses. `str(error)` is the code alone, never the body."""

    def __init__(self, code: ErasureContractErrorCode | str) -> None:
        self.code = ErasureContractErrorCode(code)
        super().__init__(self.code.value)


class ErasureResponseSendError(RetryableError):
    """Sending an answer failed; the handler should fail so that SQS retries the request.

    `code` is the service's error code (or the client exception's class name); `str(error)` is that code
    alone. `failed_sends` counts this sender's failed sends so far.
    """

    def __init__(self, code: str, failed_sends: int = 1) -> None:
        self.code = code
        self.failed_sends = failed_sends
        super().__init__(code)


class ErasureValueError(TerminalError, ValueError):
    """A refused argument (a hold id, a naive clock reading). Also a ValueError, as the contract says."""


class ErasureEnvironmentError(ErasureValueError):
    """A handler setting that is missing, not a whole number of seconds, below zero or above its cap."""

"""boto3/botocore errors converted once, where the devstack calls a client, into schema.errors types.

Messages name the operation and the error code only: never a key, a body or a request id.
"""

from __future__ import annotations

__all__ = ["RETRYABLE_CODES", "cancellation_codes", "client_error_code", "converted"]

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from schema.errors import RetryableError, TerminalError

RETRYABLE_CODES = frozenset(
    {
        "InternalServerError",
        "LimitExceededException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "ServiceUnavailable",
        "ThrottlingException",
        "TransactionInProgressException",
    }
)


def client_error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def cancellation_codes(error: ClientError) -> list[str]:
    """The per-item reason codes of a TransactionCanceledException ("None" for items that passed)."""
    reasons: Any = error.response.get("CancellationReasons") or []
    return [str(r.get("Code", "None")) for r in reasons if isinstance(r, dict)]


@contextmanager
def converted(operation: str) -> Iterator[None]:
    """Re-raise botocore errors as RetryableError / TerminalError (ClientErrors not handled by the
    caller first)."""
    try:
        yield
    except ClientError as error:
        code = client_error_code(error)
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if code in RETRYABLE_CODES or status >= 500:
            raise RetryableError(f"DynamoDB {operation} failed: {code}") from None
        raise TerminalError(f"DynamoDB {operation} failed: {code or status}") from None
    except (BotoConnectionError, HTTPClientError) as error:
        raise RetryableError(f"DynamoDB {operation} failed: {type(error).__name__}") from None
    except BotoCoreError as error:
        raise TerminalError(f"DynamoDB {operation} failed: {type(error).__name__}") from None

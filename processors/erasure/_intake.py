"""Message intake: a received SQS message as a typed job (step 1, validation), or refused.

An invalid body is refused and not deleted: SQS makes it visible again after the visibility timeout and,
after maxReceiveCount receives, moves it to the dead-letter queue. Nothing is answered for it."""

from __future__ import annotations

__all__ = ["MAX_MESSAGES", "PASS_TWO_TOKEN_ATTRIBUTE", "validated"]

import logging
from collections.abc import Mapping
from typing import Any

from processors.erasure._batch import BatchReport, Job
from schema.erasure import ErasureContractError, parse_erasure_request

logger = logging.getLogger(__name__)

PASS_TWO_TOKEN_ATTRIBUTE = "ErasurePassTwoToken"  # noqa: S105 (an attribute name, not a secret)
MAX_MESSAGES = 10  # SQS's most per receive


def validated(message: Mapping[str, Any], report: BatchReport) -> Job | None:
    """The typed request, or None for a refused message, which stays on the queue."""
    body = message.get("Body")
    receipt = message.get("ReceiptHandle")
    if not isinstance(receipt, str):
        report.refused += 1
        return None
    try:
        request = parse_erasure_request(body if isinstance(body, str) else "")
    except ErasureContractError as error:
        report.refused += 1
        logger.warning(
            "erasure message refused",
            extra={"code": str(error.code), "receive_count": _receive_count(message)},
        )
        return None
    assert isinstance(body, str)
    return Job(body=body, receipt=receipt, request=request, token=_pass_two_token(message))


def _pass_two_token(message: Mapping[str, Any]) -> str | None:
    attribute = (message.get("MessageAttributes") or {}).get(PASS_TWO_TOKEN_ATTRIBUTE)
    if not isinstance(attribute, Mapping) or attribute.get("DataType") != "String":
        return None
    value = attribute.get("StringValue")
    return value if isinstance(value, str) else None


def _receive_count(message: Mapping[str, Any]) -> int:
    raw = (message.get("Attributes") or {}).get("ApproximateReceiveCount", "0")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else 0

"""DynamoDB's per-item reasons of a cancelled transaction, read from a botocore error (the simulator's
TransactWriteItems). Every other reading of an AWS error is `schema.aws_errors`."""

from __future__ import annotations

__all__ = ["cancellation_codes"]

from typing import Any

from botocore.exceptions import ClientError


def cancellation_codes(error: ClientError) -> list[str]:
    """The per-item reason codes of a TransactionCanceledException ("None" for items that passed)."""
    reasons: Any = error.response.get("CancellationReasons") or []
    return [str(r.get("Code", "None")) for r in reasons if isinstance(r, dict)]

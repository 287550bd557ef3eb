"""The HTTP edge: every call this project makes to another service over HTTP (Array, transactions-service),
with one retry policy (`adapters.retry`) and one reading of httpx's failures (`adapters.errors`). Imports
`schema` and `config` only; the service, the cleanup and the erasure are handed these clients by
`entitlements.compose`."""

from __future__ import annotations

__all__ = [
    "ArrayAccounts",
    "ArrayClient",
    "ArrayCredentialError",
    "ArrayRequestRejected",
    "ArrayTransientError",
    "DownstreamErrors",
    "DownstreamNotFoundError",
    "DownstreamRefusedError",
    "DownstreamUnavailableError",
    "ErrArrayUserAlreadyDeleted",
    "HttpArrayAccounts",
    "HttpArrayClient",
    "HttpTransactions",
    "PrimaryAccount",
    "RetryPolicy",
    "Transactions",
    "pooled_http",
]

from adapters._caller import pooled_http
from adapters.array import ArrayAccounts, ArrayClient, HttpArrayAccounts, HttpArrayClient
from adapters.errors import (
    ArrayCredentialError,
    ArrayRequestRejected,
    ArrayTransientError,
    DownstreamErrors,
    DownstreamNotFoundError,
    DownstreamRefusedError,
    DownstreamUnavailableError,
    ErrArrayUserAlreadyDeleted,
)
from adapters.retry import RetryPolicy
from adapters.transactions import HttpTransactions, PrimaryAccount, Transactions

"""Array account cleanup: delete the Array account a TTL-expired cleanup record names, guarded, with
outcomes for every step, a durable retry queue and a retry worker. See docs/operations/cleanup.md."""

from __future__ import annotations

__all__ = [
    "DEFAULT_RETRY_DLQ_NAME",
    "DEFAULT_RETRY_QUEUE_NAME",
    "HANDLER_NAME",
    "RETENTION_SECONDS",
    "ArrayClient",
    "ArrayCredentialError",
    "ArrayRequestRejected",
    "ArrayTransientError",
    "CleanupHandler",
    "CleanupStats",
    "CleanupWork",
    "DeletedAccountsSource",
    "DrainReport",
    "DynamoDBClient",
    "ErrArrayUserAlreadyDeleted",
    "FlushTiming",
    "GuardUnavailableError",
    "HttpArrayClient",
    "RepairCandidate",
    "RepairReport",
    "RetryPass",
    "RetryQueueError",
    "RetryQueues",
    "RetryWorker",
    "SqsAdminClient",
    "SqsClient",
    "ensure_retry_queues",
    "is_cleanup_expiry",
    "repair_removed_rows",
    "work_from_event",
]

from processors.cleanup._array_client import ArrayClient, HttpArrayClient
from processors.cleanup._clients import DynamoDBClient, SqsClient
from processors.cleanup._errors import (
    ArrayCredentialError,
    ArrayRequestRejected,
    ArrayTransientError,
    ErrArrayUserAlreadyDeleted,
    GuardUnavailableError,
    RetryQueueError,
)
from processors.cleanup._handler import HANDLER_NAME, CleanupHandler, CleanupStats, FlushTiming
from processors.cleanup._repair import (
    DeletedAccountsSource,
    RepairCandidate,
    RepairReport,
    repair_removed_rows,
)
from processors.cleanup._retry_queue import (
    DEFAULT_RETRY_DLQ_NAME,
    DEFAULT_RETRY_QUEUE_NAME,
    RETENTION_SECONDS,
    RetryQueues,
    SqsAdminClient,
    ensure_retry_queues,
)
from processors.cleanup._work import CleanupWork, is_cleanup_expiry, work_from_event
from processors.cleanup.retry_worker import DrainReport, RetryPass, RetryWorker

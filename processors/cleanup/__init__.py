"""Array account cleanup: delete the Array account a TTL-expired cleanup record names, guarded, with
outcomes for every step, a durable retry queue and a retry worker. See docs/operations/cleanup.md.

The delete itself is the HTTP edge's (`adapters.HttpArrayClient`, typed `adapters.ArrayClient`), handed in
by `entitlements.compose`."""

from __future__ import annotations

__all__ = [
    "CleanupHandler",
    "DeleteValve",
    "DrainReport",
    "LocalDeletionNotes",
    "RetryQueues",
    "RetryWorker",
    "ensure_retry_queues",
    "flush_call_bounds",
    "queue_counts",
    "repair_removed_rows",
]

from processors.cleanup._clients import flush_call_bounds
from processors.cleanup._handler import CleanupHandler
from processors.cleanup._notes import LocalDeletionNotes
from processors.cleanup._repair import repair_removed_rows
from processors.cleanup._retry_queue import RetryQueues, ensure_retry_queues, queue_counts
from processors.cleanup._valve import DeleteValve
from processors.cleanup.retry_worker import DrainReport, RetryWorker

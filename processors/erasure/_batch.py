"""One received batch as the worker's rooms share it: each message's job, the batch's report and
deadline, what it consumed (to delete), the counts since the worker was made, and the tools every step
calls through (bounded calls, the parallel pool, the timings, the store's clock, the erasure)."""

from __future__ import annotations

__all__ = ["Batch", "BatchReport", "BatchTools", "Job", "WorkerStats", "account", "failed"]

import logging
from dataclasses import dataclass, field, fields

from processors.erasure._bounded import BoundedCalls, Deadline, Parallel
from processors.erasure._config import ErasureTimings
from processors.erasure._errors import aws_error_code
from processors.erasure._procedure import AccountErasure
from schema.clock import Clock
from schema.erasure import EraseRequest, ErasureRequest

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class BatchReport:
    received: int = 0
    refused: int = 0
    expired: int = 0
    not_applicable: int = 0
    holdings: int = 0
    pass_one: int = 0
    done: int = 0
    failed: int = 0
    unverified: int = 0
    metric_failures: int = 0


@dataclass(slots=True)
class WorkerStats:
    """Counts since the worker was made (no personal data: safe to log)."""

    batches: int = 0
    received: int = 0
    refused: int = 0  # invalid body: left for SQS to dead-letter
    expired: int = 0  # consumed with no answer
    not_applicable: int = 0
    holdings: int = 0
    pass_one: int = 0  # first passes done and re-enqueued
    done: int = 0  # second passes done and ACKed
    failed: int = 0  # left for redelivery after a failed step
    # Of those, second passes whose verification did not finish: their batch ran out of time, or a
    # store could not be read (also `entitlements_erasure_unverified`).
    unverified: int = 0
    metric_failures: int = 0

    def add(self, report: BatchReport) -> None:
        self.batches += 1
        for counter in fields(report):
            setattr(self, counter.name, getattr(self, counter.name) + getattr(report, counter.name))


@dataclass(slots=True)
class Job:
    body: str
    receipt: str
    request: ErasureRequest
    token: str | None  # the pass-two token the message carries, if any (verified by the passes)
    pass_number: int = 1


@dataclass(slots=True)
class Batch:
    """One received batch: its report, its deadline and the messages it consumed (to delete), each
    with the report counter that consumed it."""

    report: BatchReport
    deadline: Deadline
    consumed: list[tuple[Job, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BatchTools:
    """What every step of a batch calls through."""

    calls: BoundedCalls
    parallel: Parallel
    timings: ErasureTimings
    clock: Clock
    erasure: AccountErasure

    @property
    def limit(self) -> float:
        """Each call's own cap, within the batch's deadline."""
        return self.timings.batch_timeout_seconds


def account(job: Job) -> str:
    return job.request.key if isinstance(job.request, EraseRequest) else ""


def failed(job: Job, error: BaseException, report: BatchReport) -> None:
    """Count and log (codes only) a message left for redelivery."""
    report.failed += 1
    logger.warning(
        "erasure message left for redelivery",
        extra={
            "type": job.request.type,
            "pass": job.pass_number,
            "step": getattr(error, "step", None),
            "code": getattr(error, "code", None) or aws_error_code(error),
        },
    )

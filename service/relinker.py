"""The relinker worker: relink jobs from SQS, run at bounded concurrency through arraylink.

- `setup_relink_queues`: the job queue and its dead-letter queue (`entitlements relinker setup`; never at
  the worker's start: the worker looks the queue up and refuses when it is missing).
- `enqueue_relinks`: one job per user (`entitlements relinker enqueue --user ... | --all-active`).
- `Relinker`: `concurrency` threads, each taking one job at a time, so at most that many links are in
  flight. Each job's result is an outcome event (`link.linked`, `link.not_active`, `link.failed`),
  landed in the lake before the job is acknowledged:

  - linked, and not_active (`ErrEntitlementNotActive`: the row stopped being Active): terminal, recorded
    once and the job deleted, never retried;
  - failed for a refusal (no primary account, Array refused, unknown user): recorded, the job deleted;
  - failed after the bounded retries of a transient failure: recorded (with the delivery's attempt) and
    the job left on the queue, so SQS redelivers it after the visibility timeout and, after
    `max_receive_count` deliveries, parks it in the dead-letter queue;
  - a body that is not a job: left alone, so it reaches the dead-letter queue (nothing dropped silently).

A job holds a user id (SQS is a store like the table); logs hold counts and codes only.
"""

from __future__ import annotations

__all__ = [
    "RelinkQueueClient",
    "RelinkReport",
    "Relinker",
    "enqueue_relinks",
    "parse_job",
    "relink_job_body",
]

import json
import logging
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from adapters.sqs_runner import SqsRunner
from schema.aws_errors import AwsRetryableError, converted
from schema.errors import RetryableError
from schema.outcomes import OutcomeKind
from service.arraylink import ArrayLink, link_and_record
from service.outcomes import OutcomeRecorder

logger = logging.getLogger(__name__)

_BATCH = 10  # SQS's batch limit


class RelinkQueueClient(Protocol):
    def receive_message(self, **kwargs: Any) -> dict[str, Any]: ...
    def delete_message_batch(self, **kwargs: Any) -> dict[str, Any]: ...
    def send_message_batch(self, **kwargs: Any) -> dict[str, Any]: ...


def relink_job_body(user_id: str, job_id: str | None = None) -> str:
    return json.dumps({"jobId": job_id or uuid.uuid4().hex, "userId": user_id})


def parse_job(body: str) -> tuple[str, str] | None:
    """(job id, user id) of a job body, or None when it is not one."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    job_id, user_id = data.get("jobId"), data.get("userId")
    if isinstance(job_id, str) and job_id and isinstance(user_id, str) and user_id:
        return job_id, user_id
    return None


def enqueue_relinks(sqs: RelinkQueueClient, queue_url: str, user_ids: Iterable[str]) -> int:
    """One relink job per user id, sent in batches of ten. Returns how many were sent."""
    sent = 0
    batch: list[str] = []

    def send() -> None:
        nonlocal sent
        entries = [{"Id": str(i), "MessageBody": relink_job_body(user)} for i, user in enumerate(batch)]
        with converted("SQS SendMessageBatch"):
            answer = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        if answer.get("Failed"):
            raise AwsRetryableError("SQS SendMessageBatch", "PartialFailure")
        sent += len(entries)
        batch.clear()

    for user_id in user_ids:
        batch.append(user_id)
        if len(batch) == _BATCH:
            send()
    if batch:
        send()
    return sent


@dataclass
class RelinkReport:
    """Counts since the worker was made (no personal data: safe to print)."""

    received: int = 0
    linked: int = 0
    not_active: int = 0
    failed: int = 0  # refusals: recorded and deleted
    redelivered: int = 0  # transient failures: recorded and left for SQS to redeliver (then the DLQ)
    unreadable: int = 0
    acknowledged: int = 0


_RESULT_FIELD = {
    OutcomeKind.LINK_LINKED: "linked",
    OutcomeKind.LINK_NOT_ACTIVE: "not_active",
    OutcomeKind.LINK_FAILED: "failed",
}


class Relinker:
    """Runs relink jobs from `queue_url`, `concurrency` at a time, recording each result."""

    def __init__(
        self,
        *,
        sqs: RelinkQueueClient,
        queue_url: str,
        arraylink: ArrayLink,
        recorder: OutcomeRecorder,
        concurrency: int = 16,
        wait_seconds: int = 20,
        ack_interval_seconds: float = 0.5,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._sqs = sqs
        self._queue_url = queue_url
        self._runner = SqsRunner(sqs, queue_url, attribute_names=["ApproximateReceiveCount"])
        self._arraylink = arraylink
        self._recorder = recorder
        self._concurrency = concurrency
        self._wait_seconds = wait_seconds
        self._ack_interval = ack_interval_seconds
        self._lock = threading.Lock()
        self.report = RelinkReport()

    # -- running ------------------------------------------------------------------------------------

    def run_forever(self, stop: threading.Event) -> RelinkReport:
        """Until `stop` is set: each thread long-polls, runs its job, hands it to the acknowledger."""
        return self._run(stop, drain=False)

    def drain(self, max_seconds: float = 600.0) -> RelinkReport:
        """Until the queue answers empty to every thread (or `max_seconds` pass)."""
        stop = threading.Event()
        timer = threading.Timer(max_seconds, stop.set)
        timer.daemon = True
        timer.start()
        try:
            return self._run(stop, drain=True)
        finally:
            timer.cancel()

    def _run(self, stop: threading.Event, *, drain: bool) -> RelinkReport:
        """The SQS runner's `run_each`: `concurrency` threads run jobs, so at most that many links are in
        flight; one receiver keeps up to `concurrency` more jobs fetched ahead (ten per receive), so a
        thread that finishes a job starts the next at once. Jobs fetched ahead and not started when the
        worker stops become visible again after the queue's visibility timeout."""
        self._runner.run_each(
            stop,
            self._job,
            concurrency=self._concurrency,
            wait_seconds=self._wait_seconds,
            drain=drain,
            before_delete=self._landed,
            on_deleted=self._acknowledged,
            ack_interval_seconds=self._ack_interval,
        )
        logger.info("relinker stopped", extra=self._counts())
        return self.report

    def _counts(self) -> dict[str, int]:
        return dict(vars(self.report))

    def _job(self, message: Mapping[str, Any]) -> bool:
        """Run one job; True when it is finished (to acknowledge once its outcome has landed)."""
        self._bump("received")
        job = parse_job(str(message.get("Body", "")))
        if job is None:
            self._bump("unreadable")
            logger.warning("unreadable relink job left for the dead-letter queue")
            return False
        job_id, user_id = job
        delivery = int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
        attempt = link_and_record(self._arraylink, self._recorder, user_id, job_id=job_id, delivery=delivery)
        if attempt.kind is OutcomeKind.LINK_FAILED and isinstance(attempt.error, RetryableError):
            self._bump("redelivered")  # recorded; SQS redelivers it, then parks it in the DLQ
            return False
        self._bump(_RESULT_FIELD[attempt.kind])
        return True

    def _bump(self, name: str) -> None:
        with self._lock:
            setattr(self.report, name, getattr(self.report, name) + 1)

    # -- acknowledging ------------------------------------------------------------------------------

    def _landed(self, jobs: int) -> bool:
        """Land the recorded outcomes before the jobs they answer are deleted (never the other way
        round); False leaves the jobs for redelivery."""
        if not jobs and not self._recorder.pending:
            return True
        try:
            self._recorder.flush()
        except RetryableError as failed:
            logger.warning(
                "relink outcomes not landed: jobs left for redelivery", extra={"error": type(failed).__name__}
            )
            return False
        return True

    def _acknowledged(self, count: int) -> None:
        self._bump_by("acknowledged", count)

    def _bump_by(self, name: str, count: int) -> None:
        with self._lock:
            setattr(self.report, name, getattr(self.report, name) + count)

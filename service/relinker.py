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
    "RelinkReport",
    "Relinker",
    "SqsClient",
    "enqueue_relinks",
    "parse_job",
    "relink_job_body",
]

import json
import logging
import queue
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from schema.aws_errors import AwsRetryableError, AwsTerminalError, converted
from schema.errors import RetryableError
from schema.outcomes import OutcomeKind
from service.arraylink import ArrayLink, link_and_record
from service.outcomes import OutcomeRecorder

logger = logging.getLogger(__name__)

_BATCH = 10  # SQS's batch limit


class SqsClient(Protocol):
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


def enqueue_relinks(sqs: SqsClient, queue_url: str, user_ids: Iterable[str]) -> int:
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
        sqs: SqsClient,
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
        self._arraylink = arraylink
        self._recorder = recorder
        self._concurrency = concurrency
        self._wait_seconds = wait_seconds
        self._ack_interval = ack_interval_seconds
        self._done: queue.Queue[str] = queue.Queue()  # receipt handles to acknowledge
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
        """`concurrency` threads run jobs, so at most that many links are in flight; one receiver keeps
        up to `concurrency` more jobs fetched ahead (ten per receive), so a thread that finishes a job
        starts the next at once. Jobs fetched ahead and not started when the worker stops become
        visible again after the queue's visibility timeout."""
        finished = threading.Event()
        acknowledger = threading.Thread(target=self._acknowledge_until, args=(finished,), daemon=True)
        acknowledger.start()
        ahead: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=self._concurrency)
        running = [0]

        def work() -> None:
            while (message := ahead.get()) is not None:
                try:
                    self._job(message)
                finally:
                    with self._lock:
                        running[0] -= 1

        threads = [
            threading.Thread(target=work, name=f"relinker-{n}", daemon=True) for n in range(self._concurrency)
        ]
        for thread in threads:
            thread.start()
        while not stop.is_set():
            with self._lock:
                busy = running[0] > 0
            messages = self._receive(_BATCH, wait=1 if drain or busy else self._wait_seconds)
            if messages is None:
                stop.wait(1.0)
                continue
            if not messages and drain and not busy:
                break
            for message in messages:
                with self._lock:
                    running[0] += 1  # counted from the moment it is fetched until its job is done
                ahead.put(message)
        for _ in threads:
            ahead.put(None)
        for thread in threads:
            thread.join()
        finished.set()
        acknowledger.join()
        self._acknowledge()  # whatever is left
        logger.info("relinker stopped", extra=self._counts())
        return self.report

    def _receive(self, count: int, *, wait: int) -> list[dict[str, Any]] | None:
        """Up to `count` jobs (long polling `wait` seconds); None when SQS failed."""
        try:
            with converted("SQS ReceiveMessage"):
                answer = self._sqs.receive_message(
                    QueueUrl=self._queue_url,
                    MaxNumberOfMessages=max(1, min(_BATCH, count)),
                    WaitTimeSeconds=wait,
                    AttributeNames=["ApproximateReceiveCount"],
                )
        except (AwsRetryableError, AwsTerminalError) as failed:
            logger.warning("relink receive failed", extra={"code": failed.code})
            return None
        messages: list[dict[str, Any]] = answer.get("Messages") or []
        return messages

    def _counts(self) -> dict[str, int]:
        return dict(vars(self.report))

    def _job(self, message: dict[str, Any]) -> None:
        self._bump("received")
        job = parse_job(str(message.get("Body", "")))
        if job is None:
            self._bump("unreadable")
            logger.warning("unreadable relink job left for the dead-letter queue")
            return
        job_id, user_id = job
        delivery = int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
        attempt = link_and_record(self._arraylink, self._recorder, user_id, job_id=job_id, delivery=delivery)
        if attempt.kind is OutcomeKind.LINK_FAILED and isinstance(attempt.error, RetryableError):
            self._bump("redelivered")  # recorded; SQS redelivers it, then parks it in the DLQ
            return
        self._bump(_RESULT_FIELD[attempt.kind])
        self._done.put(str(message["ReceiptHandle"]))

    def _bump(self, name: str) -> None:
        with self._lock:
            setattr(self.report, name, getattr(self.report, name) + 1)

    # -- acknowledging ------------------------------------------------------------------------------

    def _acknowledge_until(self, finished: threading.Event) -> None:
        while not finished.wait(self._ack_interval):
            self._acknowledge()

    def _acknowledge(self) -> None:
        """Land the recorded outcomes, then delete the jobs they answer (never the other way round)."""
        handles: list[str] = []
        while True:
            try:
                handles.append(self._done.get_nowait())
            except queue.Empty:
                break
        if not handles and not self._recorder.pending:
            return
        try:
            self._recorder.flush()
        except RetryableError as failed:
            logger.warning(
                "relink outcomes not landed: jobs left for redelivery", extra={"error": type(failed).__name__}
            )
            return
        for start in range(0, len(handles), _BATCH):
            chunk = handles[start : start + _BATCH]
            entries = [{"Id": str(i), "ReceiptHandle": handle} for i, handle in enumerate(chunk)]
            try:
                with converted("SQS DeleteMessageBatch"):
                    answer = self._sqs.delete_message_batch(QueueUrl=self._queue_url, Entries=entries)
            except (AwsRetryableError, AwsTerminalError) as failed:
                logger.warning(
                    "relink acknowledgement failed", extra={"code": failed.code, "jobs": len(chunk)}
                )
                continue
            self._bump_by("acknowledged", len(chunk) - len(answer.get("Failed") or []))

    def _bump_by(self, name: str, count: int) -> None:
        with self._lock:
            setattr(self.report, name, getattr(self.report, name) + count)

"""The retry worker: drains the cleanup retry queue.

Each parked message is one `CleanupWork`. The worker records a `cleanup.retried` outcome, then runs the same
procedure as the stream handler (guard, delete, mark the row), so a parked delete that succeeds also marks
the row. Work that still cannot finish is re-sent as a new message (attempt + 1, with a growing delay) and a
`cleanup.parked` outcome is recorded. A message is deleted only after its outcomes were handed to the sink
and, when given, `flush_outcomes` returned: a crash in between redelivers it, and a redelivery is safe
(a step's outcome id is deterministic per attempt and a final outcome's per expiry, so the redelivery
replaces what it repeats; a repeat delete answers 404, which is success).

A 404 is reported as this processor's delete (`cleanup.deleted`, detail `earlier_attempt`) when a delete
of the expiry was sent before: the deletion notes (written before every request, on the host's state
directory, shared with the consumer) say so, or the parked work does (`delete_sent`, set by whichever
attempt sent one, so the rule holds for a worker on another host too). A redelivered message carries the
`delete_sent` of its first receipt; its own attempt's delete was noted before it was sent.

A message the worker cannot read is left alone: after the queue's `maxReceiveCount` receives, SQS moves it
to the dead-letter queue.
"""

from __future__ import annotations

__all__ = ["DrainReport", "RetryPass", "RetryWorker"]

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

import telemetry
from adapters import ArrayClient
from pipeline.clock import Clock
from processors.cleanup._clients import DynamoDBClient, SqsClient
from processors.cleanup._notes import DeletionNotes
from processors.cleanup._procedure import AttemptResult, CleanupProcedure, CredentialGate, make_outcome
from processors.cleanup._retry_queue import MAX_DELAY_SECONDS, park_many, queue_counts
from processors.cleanup._valve import DeleteValve
from processors.cleanup._work import CleanupWork
from schema.aws_errors import aws_error_code
from schema.outcomes import OutcomeEvent, OutcomeKind, OutcomeSink

logger = logging.getLogger(__name__)

_SQS_MAX_BATCH = 10


@dataclass(frozen=True, slots=True)
class RetryPass:
    received: int = 0
    finished: int = 0  # reached a final outcome
    reparked: int = 0
    malformed: int = 0
    kept: int = 0  # left on the queue (could not re-park or flush outcomes): redelivered later


@dataclass(frozen=True, slots=True)
class DrainReport:
    passes: int
    received: int
    finished: int
    reparked: int
    malformed: int
    empty: bool  # the queue held nothing (visible, in flight or delayed) when draining stopped


class RetryWorker:
    def __init__(
        self,
        *,
        sqs: SqsClient,
        dynamodb: DynamoDBClient,
        array: ArrayClient,
        table_name: str,
        queue_url: str,
        sink: OutcomeSink,
        clock: Clock,
        flush_outcomes: Callable[[], None] | None = None,
        concurrency: int = 8,
        retry_budget_seconds: float = 20.0,
        repark_base_delay_seconds: int = 30,
        wait_time_seconds: int = 1,
        messages_per_pass: int | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        deletion_notes: DeletionNotes | None = None,
        valve: DeleteValve | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._sqs = sqs
        self._queue_url = queue_url
        self._sink = sink
        self._clock = clock
        self._flush_outcomes = flush_outcomes
        self._concurrency = concurrency
        self._budget = retry_budget_seconds
        self._repark_base = max(0, repark_base_delay_seconds)
        self._wait_time = max(0, min(20, wait_time_seconds))
        self._per_pass = messages_per_pass or concurrency * 2
        if self._per_pass < 1:
            raise ValueError("messages_per_pass must be at least 1")
        self._monotonic = monotonic
        self._procedure = CleanupProcedure(
            dynamodb=dynamodb,
            array=array,
            table_name=table_name,
            clock=clock,
            monotonic=monotonic,
            deletion_notes=deletion_notes,
            valve=valve,
        )

    def repark_delay(self, attempt: int) -> int:
        """Seconds before re-parked work is visible again: exponential in the attempt, capped by SQS."""
        if self._repark_base == 0:
            return 0
        return int(min(MAX_DELAY_SECONDS, self._repark_base * 2 ** max(0, min(attempt - 1, 10))))

    def run_once(self) -> RetryPass:
        """Receive up to `messages_per_pass` messages (in SQS batches of 10), process them concurrently
        (at most `concurrency` at a time) under one time budget, then record and acknowledge them."""
        messages: list[dict[str, Any]] = []
        wait = self._wait_time
        while len(messages) < self._per_pass:
            batch = self._receive(min(_SQS_MAX_BATCH, self._per_pass - len(messages)), wait)
            if not batch:
                break
            messages.extend(batch)
            wait = 0
        if not messages:
            return RetryPass()

        parsed: list[tuple[dict[str, Any], CleanupWork]] = []
        malformed = 0
        for message in messages:
            try:
                parsed.append((message, CleanupWork.model_validate_json(str(message.get("Body", "")))))
            except ValidationError:
                malformed += 1  # left on the queue: the redrive policy moves it to the dead-letter queue
        if malformed:
            logger.warning(
                "unreadable retry messages left for the dead-letter queue", extra={"count": malformed}
            )

        # As in the stream handler, part of the budget is kept back for re-parking and marking.
        deadline = self._monotonic() + self._budget - min(2.0, self._budget * 0.2)
        gate = CredentialGate()
        with ThreadPoolExecutor(max_workers=min(self._concurrency, len(parsed) or 1)) as pool:
            results = list(pool.map(lambda pair: self._attempt(pair[1], deadline, gate), parsed))

        outcomes: list[OutcomeEvent] = []
        done: list[dict[str, Any]] = []
        to_repark: list[tuple[dict[str, Any], CleanupWork, str, bool]] = []
        finished = 0
        for (message, _work), (work, result) in zip(parsed, results, strict=True):
            outcomes.extend(result.outcomes)
            if result.park_reason is None:
                done.append(message)
                finished += 1
            else:
                to_repark.append((message, work, result.park_reason, result.delete_sent))
        codes = park_many(
            self._sqs,
            self._queue_url,
            [
                (
                    work.model_copy(
                        update={
                            "attempt": work.attempt + 1,
                            "park_reason": reason,
                            "delete_sent": work.delete_sent or sent,
                        }
                    ),
                    self.repark_delay(work.attempt),
                )
                for _message, work, reason, sent in to_repark
            ],
        )
        reparked = kept = 0
        for (message, work, reason, _sent), code in zip(to_repark, codes, strict=True):
            if code is None:
                outcomes.append(make_outcome(self._clock, work, OutcomeKind.CLEANUP_PARKED, reason))
                done.append(message)
                reparked += 1
            else:
                kept += 1  # left on the queue: visible again after its visibility timeout
        if kept:
            logger.warning("cleanup work could not be re-parked", extra={"count": kept})

        for outcome in outcomes:
            self._sink.add_outcome(outcome)
        if self._flush_outcomes is not None:
            self._flush_outcomes()
        self._delete(done)
        return RetryPass(
            received=len(messages), finished=finished, reparked=reparked, malformed=malformed, kept=kept
        )

    def drain(
        self, *, max_seconds: float = 600.0, sleep: Callable[[float], None] = time.sleep
    ) -> DrainReport:
        """Run passes until the queue is empty (nothing visible, in flight or delayed) or time runs out."""
        stop_at = self._monotonic() + max_seconds
        passes = received = finished = reparked = malformed = 0
        empty = False
        while self._monotonic() < stop_at:
            result = self.run_once()
            passes += 1
            received += result.received
            finished += result.finished
            reparked += result.reparked
            malformed += result.malformed
            if result.received == 0:
                if self.queue_depth() == 0:
                    empty = True
                    break
                sleep(0.2)
        return DrainReport(
            passes=passes,
            received=received,
            finished=finished,
            reparked=reparked,
            malformed=malformed,
            empty=empty,
        )

    def run_forever(self, stop: threading.Event, *, depth_every_seconds: float = 10.0) -> None:
        """Passes until `stop`; the queue's depth measured (and published) every `depth_every_seconds`."""
        measured_at: float | None = None
        while not stop.is_set():
            try:
                result = self.run_once()
                if measured_at is None or self._monotonic() - measured_at >= depth_every_seconds:
                    measured_at = self._monotonic()
                    self.queue_depth()
            except (ClientError, BotoCoreError) as failed:
                logger.warning("retry worker pass failed", extra={"code": aws_error_code(failed)})
                stop.wait(5.0)
                continue
            if result.received == 0:
                stop.wait(1.0)

    def queue_depth(self) -> int:
        depth = sum(queue_counts(self._sqs, self._queue_url).values())
        telemetry.retry_queue_depth(depth)
        return depth

    def _receive(self, count: int, wait: int) -> list[dict[str, Any]]:
        response = self._sqs.receive_message(
            QueueUrl=self._queue_url,
            MaxNumberOfMessages=count,
            WaitTimeSeconds=wait,
        )
        return list(response.get("Messages", []))

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        """Acknowledge handled messages, ten to a call. One left behind is redelivered and redone safely
        (a repeat delete answers 404)."""
        for start in range(0, len(messages), _SQS_MAX_BATCH):
            chunk = messages[start : start + _SQS_MAX_BATCH]
            try:
                response = self._sqs.delete_message_batch(
                    QueueUrl=self._queue_url,
                    Entries=[
                        {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
                        for index, message in enumerate(chunk)
                    ],
                )
            except (ClientError, BotoCoreError) as failed:
                logger.warning("retry messages not acknowledged", extra={"code": aws_error_code(failed)})
                continue
            if response.get("Failed"):
                logger.warning("retry messages not acknowledged", extra={"count": len(response["Failed"])})

    def _attempt(
        self, work: CleanupWork, deadline: float, gate: CredentialGate
    ) -> tuple[CleanupWork, AttemptResult]:
        """Record the retry, then run the procedure as attempt `work.attempt` (at least 1)."""
        work = work.model_copy(update={"attempt": max(1, work.attempt)})
        retried = make_outcome(self._clock, work, OutcomeKind.CLEANUP_RETRIED, work.park_reason)
        result = self._procedure.attempt(work, deadline=deadline, gate=gate)
        result.outcomes.insert(0, retried)
        return work, result

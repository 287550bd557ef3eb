"""The retry worker: drains the cleanup retry queue.

Each parked message is one `CleanupWork`. The worker records a `cleanup.retried` outcome, then runs the same
procedure as the stream handler (note, guard, delete, mark the row), so a parked delete that succeeds also
marks the row. Work that still cannot finish is re-sent as a new message (attempt + 1, with a growing
delay) and a `cleanup.parked` outcome is recorded. A message is deleted only after its outcomes were handed
to the sink and, when given, `flush_outcomes` returned: a crash in between redelivers it.

Nothing finished is done again. A message may arrive twice (SQS is at-least-once; the stream handler
counts a send that timed out as sent; a re-park that timed out keeps the original message, which is then
redelivered beside the copy that may have landed). Copies of one expiry received in the same pass run
once (the others are acknowledged with it, or left with it); a copy received later finds the expiry's
final note (`processors.cleanup._notes`, on the host's state folder, shared with the consumer) and
records the same final outcome again without calling Array; a copy received while another attempt of the
expiry runs on the host parks (`in_flight`). A step's outcome id is deterministic per attempt and a final
outcome's per expiry, so what a copy repeats replaces itself.

A 404 is `cleanup.already_deleted`; its detail says `earlier_attempt` when a request of the expiry was
confirmed to have reached Array before: the notes say so, or the parked work does (`delete_sent`, set by
whichever attempt sent one unanswered, so the rule holds for a worker on another host too).

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
from adapters.sqs_runner import SqsRunner
from processors.cleanup._clients import DynamoDBClient, SqsClient
from processors.cleanup._notes import DeletionNotes
from processors.cleanup._procedure import AttemptResult, CleanupProcedure, CredentialGate, make_outcome
from processors.cleanup._retry_queue import MAX_DELAY_SECONDS, park_many, queue_counts
from processors.cleanup._valve import DeleteValve
from processors.cleanup._work import CleanupWork
from schema.aws_errors import AwsRetryableError, AwsTerminalError, aws_error_code
from schema.clock import Clock
from schema.outcomes import OutcomeEvent, OutcomeKind, OutcomeSink

logger = logging.getLogger(__name__)


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
        self._runner = SqsRunner(sqs, queue_url)
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
        messages = [dict(message) for message in self._runner.receive_up_to(self._per_pass, self._wait_time)]
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

        parsed, copies = _one_per_expiry(parsed)

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
        # A copy goes with the message it repeats: acknowledged with it, or left with it.
        done.extend(copy for message in list(done) for copy in copies.get(id(message), ()))
        self._runner.delete(done)  # one left behind is redelivered and redone safely (a repeat 404s)
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
            except (ClientError, BotoCoreError, AwsRetryableError, AwsTerminalError) as failed:
                code = failed.code if isinstance(failed, AwsRetryableError | AwsTerminalError) else None
                logger.warning("retry worker pass failed", extra={"code": code or aws_error_code(failed)})
                stop.wait(5.0)
                continue
            if result.received == 0:
                stop.wait(1.0)

    def queue_depth(self) -> int:
        depth = sum(queue_counts(self._sqs, self._queue_url).values())
        telemetry.retry_queue_depth(depth)
        return depth

    def _attempt(
        self, work: CleanupWork, deadline: float, gate: CredentialGate
    ) -> tuple[CleanupWork, AttemptResult]:
        """Record the retry, then run the procedure as attempt `work.attempt` (at least 1)."""
        work = work.model_copy(update={"attempt": max(1, work.attempt)})
        retried = make_outcome(self._clock, work, OutcomeKind.CLEANUP_RETRIED, work.park_reason)
        result = self._procedure.attempt(work, deadline=deadline, gate=gate)
        result.outcomes.insert(0, retried)
        return work, result


def _one_per_expiry(
    parsed: list[tuple[dict[str, Any], CleanupWork]],
) -> tuple[list[tuple[dict[str, Any], CleanupWork]], dict[int, list[dict[str, Any]]]]:
    """One message per expiry (its highest attempt, saying `delete_sent` if any copy does); the other
    copies of it, by the kept message's id."""
    groups: dict[str, list[tuple[dict[str, Any], CleanupWork]]] = {}
    for pair in parsed:
        groups.setdefault(pair[1].source_event_id, []).append(pair)
    kept: list[tuple[dict[str, Any], CleanupWork]] = []
    copies: dict[int, list[dict[str, Any]]] = {}
    for group in groups.values():
        message, work = max(group, key=lambda pair: pair[1].attempt)
        if any(other.delete_sent for _message, other in group):
            work = work.model_copy(update={"delete_sent": True})
        kept.append((message, work))
        if len(group) > 1:
            copies[id(message)] = [other for other, _work in group if other is not message]
    if copies:
        logger.info(
            "copies of one expiry in one pass run once",
            extra={"copies": sum(len(others) for others in copies.values())},
        )
    return kept, copies

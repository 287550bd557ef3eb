"""The cleanup handler: a pipeline `Handler` that deletes the Array account an expired cleanup record names.

`add` keeps only TTL removals of cleanup records (everything else is ignored, counted) and raises
`schema.errors.RecordRejected` for one whose own content names no account (an empty `arrayAccountId`, no
old image, an image that does not fit the record): the consumer dead-letters that record alone and the
other expiries of the window are executed.

`flush` runs the batch's cleanups concurrently (bounded) under one time budget, `retry_budget_seconds`,
that every call is inside (DynamoDB, Array, SQS): each cleanup is guarded, deleted, and its row marked.

- Calls to Array start only before `budget - reserve` (the client cuts its last timeout to it).
- The flush waits for the attempts until `budget - 3/4 reserve`, whatever a DynamoDB call is doing (a
  hung call is left to its botocore read timeout, in a thread nobody waits for): an attempt not back by
  then is parked, unless its delete was already answered (then it is finished; a mark that did not
  answer is recorded as `cleanup.mark_failed`, detail `deadline`).
- Whatever cannot finish (transient Array failures, an expired credential, an unreadable GSI1, the
  deadline) is parked in the durable retry queue, ten to a call, a few calls at a time, by `budget`.
- When the retry queue does not take the work (a refusal, or no answer by `budget`), the work stays
  pending and `flush` raises `RetryQueueError` (retryable): after a refusal the consumer retries, then
  parks the raw records in its local parked store; when the queue did not answer, the error says
  `park_now` and the consumer parks them at once. For `budget` seconds after the retry queue did not
  answer, a flush with work raises at once (`park_now` too), so a hung queue holds the shard once.

Work already finished is never redone by the consumer's retry: only unfinished work stays pending.
And it is never parked by the consumer: `RetryQueueError` is a `schema.errors.FlushIncomplete` naming,
as finished, every event given since the last successful flush whose work ended: each expiry whose
outcome was recorded (deleted, already deleted, refused, or parked in the retry queue, which owns it
from then on) and each event that asked for nothing (not a cleanup expiry). The consumer parks only the
others (unless the lake, fed the outcomes, failed too: then all replay, see `pipeline.shard_consumer`).
"""

from __future__ import annotations

__all__ = ["HANDLER_NAME", "CleanupHandler", "CleanupStats", "FlushTiming"]

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from adapters import ArrayClient
from pipeline.clock import Clock
from pipeline.events import StreamEvent
from processors.cleanup._clients import DynamoDBClient, SqsClient
from processors.cleanup._errors import RetryQueueError
from processors.cleanup._notes import DeletionNotes
from processors.cleanup._procedure import AttemptResult, CleanupProcedure, CredentialGate, make_outcome
from processors.cleanup._retry_queue import park_many
from processors.cleanup._valve import DeleteValve
from processors.cleanup._work import CleanupWork, cleanup_work_for
from schema.outcomes import FINAL_CLEANUP_OUTCOMES, OutcomeKind, OutcomeSink

logger = logging.getLogger(__name__)

HANDLER_NAME = "cleanup"
_SQS_MAX_BATCH = 10  # entries in one SendMessageBatch
_PARK_CONCURRENCY = 4  # SendMessageBatch calls in flight at once while parking


@dataclass(frozen=True, slots=True)
class FlushTiming:
    """One flush, in `time.monotonic()` seconds: the recorded evidence of how long the shard was held."""

    started: float
    attempts_done: float  # every attempt returned; parking follows
    finished: float
    cleanups: int
    parked: int

    @property
    def seconds(self) -> float:
        return self.finished - self.started


@dataclass(slots=True)
class CleanupStats:
    ignored: int = 0
    accepted: int = 0
    finished: int = 0
    parked: int = 0
    park_failures: int = 0


class CleanupHandler:
    """Register with the consumer's `HandlerRegistry` as feeding the lake (`feeds=("lake",)`), so that
    the outcomes this handler adds during its flush are flushed by the lake before the checkpoint."""

    def __init__(
        self,
        *,
        dynamodb: DynamoDBClient,
        sqs: SqsClient,
        array: ArrayClient,
        table_name: str,
        retry_queue_url: str,
        sink: OutcomeSink,
        clock: Clock,
        concurrency: int = 8,
        retry_budget_seconds: float = 20.0,
        park_reserve_seconds: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        deletion_notes: DeletionNotes | None = None,
        valve: DeleteValve | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if retry_budget_seconds <= 0:
            raise ValueError("the retry budget must be positive")
        self._sqs = sqs
        self._queue_url = retry_queue_url
        self._sink = sink
        self._clock = clock
        self._concurrency = concurrency
        self._budget = retry_budget_seconds
        # Time kept back from the Array calls for parking and marking after the last retry.
        self._reserve = (
            park_reserve_seconds if park_reserve_seconds is not None else min(3.0, retry_budget_seconds * 0.3)
        )
        if not 0 <= self._reserve < retry_budget_seconds:
            raise ValueError("the park reserve must be within the retry budget")
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
        self._pending: list[CleanupWork] = []
        # Events given since the last successful flush that need nothing more: (shard id, sequence).
        self._finished: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._timings: list[FlushTiming] = []
        # Until this `monotonic` instant, the retry queue is taken as unresponsive (it did not answer).
        self._queue_silent_until: float | None = None
        self.stats = CleanupStats()

    @property
    def name(self) -> str:
        return HANDLER_NAME

    @property
    def retry_budget_seconds(self) -> float:
        return self._budget

    @property
    def flush_timings(self) -> tuple[FlushTiming, ...]:
        with self._lock:
            return tuple(self._timings)

    def add(self, event: StreamEvent) -> None:
        work = cleanup_work_for(event)  # RecordRejected: the consumer dead-letters this record alone
        if work is None:
            with self._lock:
                self._finished.add((event.position.shard_id, event.position.sequence_number))
            self.stats.ignored += 1
            return
        with self._lock:
            self._pending.append(work)
        self.stats.accepted += 1

    def discard_pending(self) -> None:
        with self._lock:
            self._pending.clear()
            self._finished.clear()

    def flush(self) -> None:
        with self._lock:
            pending = list(self._pending)
            if not pending:
                self._finished.clear()
                return
        started = self._monotonic()
        if self._queue_silent_until is not None and started < self._queue_silent_until:
            logger.warning(
                "cleanup flush skipped: the retry queue did not answer", extra={"cleanups": len(pending)}
            )
            raise RetryQueueError(
                "retry_queue_unresponsive",
                park_now=True,
                finished=self._finished_now(),
                context=pending[0].context,
            )
        flush_deadline = started + self._budget
        to_park = self._attempt_all(pending, started)
        attempts_done = self._monotonic()
        codes = self._park(to_park, flush_deadline)
        unfinished: list[CleanupWork] = []
        # Unfinished work whose delete was sent stays pending saying so (the consumer's retry).
        sent_since: dict[int, CleanupWork] = {}
        for (work, reason, sent), code in zip(to_park, codes, strict=True):
            if code is None:
                self._sink.add_outcome(make_outcome(self._clock, work, OutcomeKind.CLEANUP_PARKED, reason))
            else:
                unfinished.append(work)
                if sent and not work.delete_sent:
                    sent_since[id(work)] = work.model_copy(update={"delete_sent": True})
        if unfinished:
            logger.warning(
                "cleanup work could not be parked",
                extra={"unparked": len(unfinished), "codes": sorted({code for code in codes if code})},
            )
        parked = len(to_park) - len(unfinished)
        finished = self._monotonic()
        with self._lock:
            # Work added while flushing (not expected: the consumer is single-threaded) stays pending.
            done = {id(work) for work in pending} - {id(work) for work in unfinished}
            self._pending = [sent_since.get(id(work), work) for work in self._pending if id(work) not in done]
            self._finished.update(
                (work.source_shard_id, work.source_sequence_number) for work in pending if id(work) in done
            )
            if not unfinished:
                self._finished.clear()
            self._timings.append(
                FlushTiming(
                    started=started,
                    attempts_done=attempts_done,
                    finished=finished,
                    cleanups=len(pending),
                    parked=parked,
                )
            )
        self.stats.finished += len(pending) - len(unfinished)
        self.stats.parked += parked
        self.stats.park_failures += len(unfinished)
        logger.info(
            "cleanup flush",
            extra={
                "cleanups": len(pending),
                "parked": parked,
                "unparked": len(unfinished),
                "seconds": round(finished - started, 3),
            },
        )
        if unfinished:
            raise RetryQueueError(
                f"{len(unfinished)}_unparked",
                park_now=self._queue_silent_until is not None,  # it did not answer: park at once
                finished=self._finished_now(),
                context=unfinished[0].context,
            )

    def _finished_now(self) -> frozenset[tuple[str, str]]:
        with self._lock:
            return frozenset(self._finished)

    def _attempt_all(
        self, pending: Sequence[CleanupWork], started: float
    ) -> list[tuple[CleanupWork, str, bool]]:
        """Run every attempt; hand their outcomes to the sink; return the work to park, with why and
        whether its delete was sent (`AttemptResult.delete_sent`)."""
        array_deadline = started + self._budget - self._reserve
        wait_until = started + self._budget - self._reserve * 0.75
        gate = CredentialGate()
        attempts = [(work, AttemptResult()) for work in pending]
        pool = ThreadPoolExecutor(
            max_workers=min(self._concurrency, len(pending)), thread_name_prefix="cleanup"
        )
        try:
            futures: list[Future[AttemptResult]] = [
                pool.submit(self._procedure.attempt, work, deadline=array_deadline, gate=gate, result=result)
                for work, result in attempts
            ]
            wait(futures, timeout=max(0.0, wait_until - self._monotonic()))
        finally:
            # A call still hanging ends at its botocore timeout, in a thread nobody waits for.
            pool.shutdown(wait=False, cancel_futures=True)
        to_park: list[tuple[CleanupWork, str, bool]] = []
        late = 0
        for (work, result), future in zip(attempts, futures, strict=True):
            # Whether it returned is read before the result is closed: an attempt that returns after
            # the close recorded nothing past it, so it counts as late (parked, or finished if final).
            returned = future.done() and not future.cancelled() and future.exception() is None
            outcomes, stage = result.close()
            for outcome in outcomes:
                self._sink.add_outcome(outcome)
            if returned:
                if result.park_reason is not None:
                    to_park.append((work, result.park_reason, result.delete_sent))
                continue
            late += 1
            if any(outcome.kind in FINAL_CLEANUP_OUTCOMES for outcome in outcomes):
                if stage == "mark":  # deleted; the best-effort mark did not answer in time
                    self._sink.add_outcome(
                        make_outcome(self._clock, work, OutcomeKind.CLEANUP_MARK_FAILED, "deadline")
                    )
                continue
            failure = future.exception() if future.done() and not future.cancelled() else None
            if failure is not None:
                logger.warning("cleanup attempt failed unexpectedly", extra={"code": type(failure).__name__})
            if failure is not None:
                to_park.append((work, type(failure).__name__, result.delete_sent))
            else:  # not started ("budget": not reached), or still waiting on a call ("guard:deadline")
                reason = "budget" if stage == "start" else f"{stage}:deadline"
                to_park.append((work, reason, result.delete_sent))
        if late:
            logger.warning("cleanup attempts not back within the budget", extra={"count": late})
        return to_park

    def _park(self, to_park: Sequence[tuple[CleanupWork, str, bool]], deadline: float) -> list[str | None]:
        """Park the work (attempt + 1) by `deadline`, ten to a call, a few calls at a time: per item, None
        when the retry queue took it, else a short code. A call not answered by then counts as refusing
        its ten (`timeout`), and the queue is taken as unresponsive for one budget."""
        works = [
            (
                work.model_copy(
                    update={
                        "attempt": work.attempt + 1,
                        "park_reason": reason,
                        "delete_sent": work.delete_sent or sent,
                    }
                ),
                0,
            )
            for work, reason, sent in to_park
        ]
        chunks = [works[start : start + _SQS_MAX_BATCH] for start in range(0, len(works), _SQS_MAX_BATCH)]
        if not chunks:
            return []
        pool = ThreadPoolExecutor(
            max_workers=min(_PARK_CONCURRENCY, len(chunks)), thread_name_prefix="cleanup-park"
        )
        try:
            futures = [pool.submit(park_many, self._sqs, self._queue_url, chunk) for chunk in chunks]
            wait(futures, timeout=max(0.0, deadline - self._monotonic()))
        finally:
            # A call still hanging ends at its botocore timeout, in a thread nobody waits for.
            pool.shutdown(wait=False, cancel_futures=True)
        codes: list[str | None] = []
        silent = False
        for chunk, future in zip(chunks, futures, strict=True):
            if not future.done() or future.cancelled():
                silent = True
                codes.extend(["timeout"] * len(chunk))
            elif (failure := future.exception()) is not None:
                logger.warning("parking failed unexpectedly", extra={"code": type(failure).__name__})
                codes.extend([type(failure).__name__] * len(chunk))
            else:
                codes.extend(future.result())
        self._queue_silent_until = self._monotonic() + self._budget if silent else None
        return codes

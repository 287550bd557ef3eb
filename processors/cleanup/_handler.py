"""The cleanup handler: a pipeline `Handler` that deletes the Array account an expired cleanup record names.

`add` keeps only TTL removals of cleanup records (everything else is ignored, counted). `flush` runs the
batch's cleanups concurrently (bounded) under one time budget: each is guarded, deleted, and its row
marked; whatever cannot finish inside the budget (transient Array failures, an expired credential, an
unreadable GSI1) is parked in the durable retry queue, so the flush returns inside the budget and the
shard moves on. Only a failure to park keeps work pending: then `flush` raises `RetryableError` and the
consumer retries it (work already finished is not redone).
"""

from __future__ import annotations

__all__ = ["HANDLER_NAME", "CleanupHandler", "CleanupStats", "FlushTiming"]

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from pipeline.clock import Clock
from pipeline.events import CleanupExpired, StreamEvent
from processors.cleanup._array_client import ArrayClient
from processors.cleanup._clients import DynamoDBClient, SqsClient
from processors.cleanup._errors import RetryQueueError
from processors.cleanup._procedure import CleanupProcedure, CredentialGate, make_outcome
from processors.cleanup._retry_queue import park_many
from processors.cleanup._work import CleanupWork, is_cleanup_expiry, work_from_event
from schema.outcomes import OutcomeEvent, OutcomeKind, OutcomeSink, outcome_id

logger = logging.getLogger(__name__)

HANDLER_NAME = "cleanup"


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
    """Register with the consumer's `HandlerRegistry` before the lake's handler, so that the outcomes this
    handler adds during its flush are flushed by the lake before the checkpoint."""

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
            park_reserve_seconds if park_reserve_seconds is not None else min(2.0, retry_budget_seconds * 0.2)
        )
        if not 0 <= self._reserve < retry_budget_seconds:
            raise ValueError("the park reserve must be within the retry budget")
        self._monotonic = monotonic
        self._procedure = CleanupProcedure(
            dynamodb=dynamodb, array=array, table_name=table_name, clock=clock, monotonic=monotonic
        )
        self._pending: list[CleanupWork] = []
        self._lock = threading.Lock()
        self._timings: list[FlushTiming] = []
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
        if is_cleanup_expiry(event) and isinstance(event, CleanupExpired):
            work = work_from_event(event)
            with self._lock:
                self._pending.append(work)
            self.stats.accepted += 1
            return
        if isinstance(event, CleanupExpired):
            # A TTL removal whose old image is missing names no account: nothing can be deleted. It is
            # recorded as a terminal failure so the audits see this expiry reach a final state.
            self._sink.add_outcome(
                OutcomeEvent(
                    outcome_id=outcome_id(event.event_id, OutcomeKind.CLEANUP_FAILED),
                    kind=OutcomeKind.CLEANUP_FAILED,
                    occurred_at=self._clock.now(),
                    user_id=event.user_id,
                    array_account_id=None,
                    source_event_id=event.event_id,
                    source_stream_arn=event.position.stream_arn,
                    source_shard_id=event.position.shard_id,
                    source_sequence_number=event.position.sequence_number,
                    detail="missing_old_image",
                )
            )
            return
        self.stats.ignored += 1

    def discard_pending(self) -> None:
        with self._lock:
            self._pending.clear()

    def flush(self) -> None:
        with self._lock:
            pending = list(self._pending)
        if not pending:
            return
        started = self._monotonic()
        array_deadline = started + self._budget - self._reserve
        gate = CredentialGate()
        to_park: list[tuple[CleanupWork, str]] = []
        with ThreadPoolExecutor(
            max_workers=min(self._concurrency, len(pending)), thread_name_prefix="cleanup"
        ) as pool:
            futures = {
                pool.submit(self._procedure.attempt, work, deadline=array_deadline, gate=gate): work
                for work in pending
            }
            for future in as_completed(futures):
                result = future.result()
                for outcome in result.outcomes:
                    self._sink.add_outcome(outcome)
                if result.park_reason is not None:
                    to_park.append((futures[future], result.park_reason))

        attempts_done = self._monotonic()
        # Parking is batched (ten to a call), after the workers: a batch cut short by the budget parks
        # its untried rest in a few calls rather than one call each.
        codes = park_many(
            self._sqs,
            self._queue_url,
            [
                (work.model_copy(update={"attempt": work.attempt + 1, "park_reason": reason}), 0)
                for work, reason in to_park
            ],
        )
        unfinished: list[CleanupWork] = []
        for (work, reason), code in zip(to_park, codes, strict=True):
            if code is None:
                self._sink.add_outcome(make_outcome(self._clock, work, OutcomeKind.CLEANUP_PARKED, reason))
            else:
                unfinished.append(work)
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
            self._pending = [work for work in self._pending if id(work) not in done]
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
            raise RetryQueueError(f"{len(unfinished)}_unparked", context=unfinished[0].context)

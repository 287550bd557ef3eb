"""The cleanup handler: a pipeline `Handler` that deletes the Array account an expired cleanup record names.

`add` keeps only TTL removals of cleanup records (everything else is ignored, counted) and raises
`schema.errors.RecordRejected` for one whose own content names no account (an empty `arrayAccountId`, no
old image, an image that does not fit the record): the consumer dead-letters that record alone and the
other expiries of the window are executed.

`flush` runs the batch's cleanups on `concurrency` lanes (`pipeline.lanes`: one item's expiries in stream
order, different items at once) under one time budget, `retry_budget_seconds`, that every call is inside
(DynamoDB, Array, SQS): each cleanup is guarded, deleted, and its row marked. An attempt that parks holds
its item's later expiries of the batch: they are parked behind it (`held`), never run before it.

With `slow_after_seconds` (the consumer's setting; None by default, for callers that do not read
`running`), a flush stops waiting once some cleanup ended and every one left has run that long (or waits
behind one that has): it hands the finished ones' outcomes to the sink and returns, and the slow ones run
on, reported by `running()`; the shard consumer checkpoints below them. A later flush collects them, and
gives up on one still running at its own batch's deadline exactly as below.

- Calls to Array start only before `budget - reserve` (the client cuts its last timeout to it).
- The flush waits for the attempts until `budget - 3/4 reserve`, whatever a DynamoDB call is doing (a
  hung call is left to its botocore read timeout on its lane; that item's later expiries wait for it,
  the other items do not): an attempt not back by then is parked, unless its delete was already
  answered (then it is finished; a mark that did not answer is parked, detail `mark:deadline`, carrying
  its final note, so that the retry worker marks the rows without calling Array and records the mark's
  own answer: a slow mark is not a failed one).
- Whatever cannot finish (transient Array failures, an expired credential, an unreadable GSI1, the
  deadline) is parked in the durable retry queue, ten to a call, a few calls at a time, by `budget`.
- A send to the retry queue that timed out (no answer by `budget`, or botocore's read timeout or lost
  connection after the request was sent) **counts as sent**: SQS often took the message all the same
  (botocore's own retry lands it later), and the queue is at-least-once anyway, so a copy parked locally
  too made each expiry run several times. FIFO queues' deduplication ids would settle it, but FIFO
  queues refuse the per-message delays the retry queue uses. A doubled message is harmless: the
  expiry's notes make its second run call nobody (`processors.cleanup._notes`). A send still running at
  `budget` that later fails for certain (refused, or no connection made) is sent again by this
  handler's next flush; a process that dies before that loses that copy (the expiry's `cleanup.parked`
  outcome with no final outcome shows it in the lake).
- When the retry queue refuses the work (or a send never started), the work stays pending and `flush`
  raises `RetryQueueError` (retryable): the consumer retries, then parks the raw records in its local
  parked store. For `budget` seconds after the retry queue did not answer, a flush with work raises at
  once (`park_now`), so a hung queue holds the shard once.

Work already finished is never redone by the consumer's retry: only unfinished work stays pending.
And it is never parked by the consumer: `RetryQueueError` is a `schema.errors.FlushIncomplete` naming,
as finished, every event given since the last successful flush whose work ended: each expiry whose
outcome was recorded (deleted, already deleted, refused, or parked in the retry queue, which owns it
from then on) and each event that asked for nothing (not a cleanup expiry). The consumer parks only the
others (unless the lake, fed the outcomes, failed too: then all replay, see `pipeline.shard_consumer`).
"""

from __future__ import annotations

__all__ = ["HANDLER_NAME", "CleanupHandler", "CleanupStats", "FlushTiming"]

import functools
import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from adapters import ArrayClient
from pipeline import Lanes, Position, StreamEvent, Ticket, TicketState, item_key
from processors.cleanup._clients import DynamoDBClient, SqsClient
from processors.cleanup._errors import RetryQueueError
from processors.cleanup._notes import DeletionNotes
from processors.cleanup._procedure import (
    AttemptResult,
    CleanupProcedure,
    CredentialGate,
    final_note_of,
    make_outcome,
)
from processors.cleanup._retry_queue import MAYBE_TAKEN_CODES, park_many
from processors.cleanup._valve import DeleteValve
from processors.cleanup._work import CleanupWork, cleanup_work_for
from schema.clock import Clock
from schema.outcomes import OutcomeKind, OutcomeSink

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
    # Sends that timed out, counted as sent; and those of them found failed later, sent again.
    park_unconfirmed: int = 0
    park_resent: int = 0


@dataclass(slots=True)
class _OnLane:
    """One cleanup on the lanes: its work, the attempt's result, and its batch's deadlines."""

    work: CleanupWork
    ticket: Ticket[AttemptResult]
    result: AttemptResult
    give_up_at: float  # `monotonic`: the flush stops waiting for it (its batch's `wait_until`)


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
        slow_after_seconds: float | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if slow_after_seconds is not None and slow_after_seconds <= 0:
            raise ValueError("slow_after_seconds must be positive")
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
        self._slow_after = slow_after_seconds
        # Each cleanup on a lane keyed by its item; a parked result holds its item's later expiries.
        self._lanes: Lanes[AttemptResult] = Lanes(
            concurrency,
            name="cleanup",
            failed=lambda result: result.park_reason is not None,
            monotonic=monotonic,
        )
        self._pending: list[CleanupWork] = []
        self._keys: dict[int, Hashable] = {}  # id(work) -> its item's lane key
        # Cleanups a flush returned before (slow ones): still on the lanes.
        self._carried: list[_OnLane] = []
        # Events given since the last successful flush that need nothing more: (shard id, sequence).
        self._finished: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._timings: list[FlushTiming] = []
        # Until this `monotonic` instant, the retry queue is taken as unresponsive (it did not answer).
        self._queue_silent_until: float | None = None
        # Parked work whose send timed out (counted as sent) and then failed for certain: sent again
        # by the next flush.
        self._resend: list[tuple[CleanupWork, int]] = []
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
            self._keys[id(work)] = item_key(event.keys)
        self.stats.accepted += 1

    def discard_pending(self) -> None:
        """Forget the work not on the lanes (the consumer parked its records); cleanups still running
        there (`running`) stay, to be collected by a later flush."""
        with self._lock:
            self._pending.clear()
            self._keys = {id(on.work): self._keys[id(on.work)] for on in self._carried}
            self._finished.clear()

    def running(self) -> frozenset[Position]:
        """The expiries still on the lanes after the last flush returned (slow ones): not finished."""
        with self._lock:
            return frozenset(
                (on.work.source_shard_id, on.work.source_sequence_number) for on in self._carried
            )

    def abandon(self) -> None:
        """Forget everything, the cleanups still running too: what they record from now on is dropped
        (their notes are still written, for whoever handles the expiries again)."""
        with self._lock:
            carried, self._carried = self._carried, []
            self._pending.clear()
            self._keys = {}
            self._finished.clear()
        for on in carried:
            on.result.close()
        self._lanes.abandon()

    def flush(self) -> None:
        self._send_again()
        with self._lock:
            pending = list(self._pending)
            if not pending and not self._carried:
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
                context=(pending[0] if pending else self._carried[0].work).context,
            )
        flush_deadline = started + self._budget
        to_park, ended = self._attempt_all(pending, started)
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
            # Work added while flushing (not expected: the consumer is single-threaded) stays pending;
            # so does work still on the lanes (`_carried`), and work the retry queue did not take.
            # Work parked for its mark alone (a copy carrying its final note) that the queue refused is
            # finished: its delete is final, and a rerun would only record the same outcome again.
            taken = {id(work) for work in pending}
            unparked = {id(work) for work in unfinished}
            kept = [work for work in ended if id(work) in unparked]
            self._pending = [
                sent_since.get(id(work), work)
                for work in [*kept, *(w for w in self._pending if id(w) not in taken)]
            ]
            for work in kept:
                self._keys[id(sent_since.get(id(work), work))] = self._keys.get(id(work), b"")
            self._finished.update(
                (work.source_shard_id, work.source_sequence_number)
                for work in ended
                if id(work) not in unparked
            )
            for work in ended:
                if id(work) not in unparked:
                    self._keys.pop(id(work), None)
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
        self.stats.finished += len(ended) - len(unfinished)
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
    ) -> tuple[list[tuple[CleanupWork, str, bool]], list[CleanupWork]]:
        """Put the new work on the lanes and wait (`Lanes.settle`); hand the outcomes of what ended to
        the sink; return the work to park, with why and whether its delete was sent
        (`AttemptResult.delete_sent`), and every work that ended (the slow ones left on the lanes are
        `_carried`)."""
        array_deadline = started + self._budget - self._reserve
        wait_until = started + self._budget - self._reserve * 0.75
        gate = CredentialGate()
        with self._lock:
            carried = list(self._carried)
            keys = [self._keys.get(id(work)) or item_key({"event": work.source_event_id}) for work in pending]
        results = [AttemptResult() for _ in pending]
        tickets = self._lanes.submit(
            (
                key,
                (work.source_shard_id, work.source_sequence_number),
                functools.partial(
                    self._procedure.attempt, work, deadline=array_deadline, gate=gate, result=result
                ),
            )
            for work, key, result in zip(pending, keys, results, strict=True)
        )
        on_lanes = [
            *carried,
            *(
                _OnLane(work, ticket, result, wait_until)
                for work, ticket, result in zip(pending, tickets, results, strict=True)
            ),
        ]
        # No longer than the first carried cleanup's own deadline: the flush then gives up on it.
        until = min([wait_until, *(on.give_up_at for on in carried)])
        self._lanes.settle([on.ticket for on in on_lanes], until=until, slow_after=self._slow_after)
        now = self._monotonic()
        to_park: list[tuple[CleanupWork, str, bool]] = []
        ended: list[CleanupWork] = []
        still: list[_OnLane] = []
        failed_keys: set[Hashable] = set()
        late = 0
        for on in on_lanes:
            if not on.ticket.ended and self._slow_after is not None and now < on.give_up_at:
                still.append(on)  # slow: left running, collected by a later flush
                continue
            ended.append(on.work)
            if on.ticket.state not in (TicketState.DONE, TicketState.HELD):
                failed_keys.add(on.ticket.key)  # a failure (or one given up now): its key is held
            late += self._conclude(on, to_park)
        with self._lock:
            self._carried = still
        # The failures are on their way to the retry queue, behind them their items' held expiries: the
        # items run again.
        for key in failed_keys:
            self._lanes.release(key)
        if late:
            logger.warning("cleanup attempts not back within the budget", extra={"count": late})
        if still:
            logger.info("slow cleanups left running on their lanes", extra={"count": len(still)})
        return to_park, ended

    def _conclude(self, on: _OnLane, to_park: list[tuple[CleanupWork, str, bool]]) -> bool:
        """Hand a cleanup's outcomes to the sink and add it to `to_park` when it must be parked; give up
        on it first when it is still running (its batch's deadline came). True when it was late."""
        work, ticket, result = on.work, on.ticket, on.result
        # Whether it returned is read before the result is closed: an attempt that returns after the
        # close recorded nothing past it, so it counts as late (parked, or finished if final).
        returned = not self._lanes.give_up(ticket)
        if ticket.state is TicketState.HELD:  # an earlier expiry of its item parked: never run
            result.close()
            to_park.append((work, "held", work.delete_sent))
            return False
        outcomes, stage = result.close()
        for outcome in outcomes:
            self._sink.add_outcome(outcome)
        if returned and ticket.error is None:
            if result.park_reason is not None:
                to_park.append((work, result.park_reason, result.delete_sent))
            return False
        if returned:  # the attempt raised
            code = type(ticket.error).__name__
            logger.warning("cleanup attempt failed unexpectedly", extra={"code": code})
            to_park.append((work, code, result.delete_sent))
            return False
        final = final_note_of(outcomes)
        if final is not None:
            if stage == "mark":  # deleted; the best-effort mark did not answer in time
                # Not a failed mark (the call may yet land): parked for its mark alone, the retry
                # records the same final outcome and marks the rows, calling Array for nothing (the
                # final note travels with the work). Its mark's own answer, `row_marked` or
                # `mark_failed` with the code, is what the audits count; `cleanup.parked`
                # (`mark:deadline`) records the wait.
                carried = work.model_copy(
                    update={"final_state": final.state.value, "final_detail": final.detail}
                )
                to_park.append((carried, "mark:deadline", True))
            return True
        # not started ("budget": not reached), or still waiting on a call ("guard:deadline")
        reason = "budget" if stage == "start" else f"{stage}:deadline"
        to_park.append((work, reason, result.delete_sent))
        return True

    def _park(self, to_park: Sequence[tuple[CleanupWork, str, bool]], deadline: float) -> list[str | None]:
        """Park the work (attempt + 1) by `deadline`, ten to a call, a few calls at a time: per item, None
        when the retry queue took it or the send timed out (counted as sent), else a short code. A call
        not answered by then makes the queue taken as unresponsive for one budget."""
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
            # A call still hanging ends at its botocore timeout, in a thread nobody waits for; one not
            # started is cancelled (never sent).
            pool.shutdown(wait=False, cancel_futures=True)
        codes: list[str | None] = []
        silent = False
        unconfirmed = 0
        for chunk, future in zip(chunks, futures, strict=True):
            if future.cancelled():  # never started: nothing was sent
                silent = True
                codes.extend(["not_sent"] * len(chunk))
            elif not future.done():  # sent, unanswered: counted as sent, watched until it ends
                silent = True
                unconfirmed += len(chunk)
                codes.extend([None] * len(chunk))
                future.add_done_callback(functools.partial(self._watch, chunk))
            elif (failure := future.exception()) is not None:
                logger.warning("parking failed unexpectedly", extra={"code": type(failure).__name__})
                codes.extend([type(failure).__name__] * len(chunk))
            else:
                for code in future.result():
                    if code in MAYBE_TAKEN_CODES:
                        unconfirmed += 1
                        codes.append(None)
                    else:
                        codes.append(code)
        if unconfirmed:
            logger.warning("retry queue sends timed out; counted as sent", extra={"count": unconfirmed})
            self.stats.park_unconfirmed += unconfirmed
        self._queue_silent_until = self._monotonic() + self._budget if silent else None
        return codes

    def _watch(self, chunk: Sequence[tuple[CleanupWork, int]], late: Future[list[str | None]]) -> None:
        """A send counted as sent has ended: the entries it failed for certain are sent again."""
        if late.cancelled() or late.exception() is not None:
            failed = list(chunk)
        else:
            failed = [
                item
                for item, code in zip(chunk, late.result(), strict=True)
                if code is not None and code not in MAYBE_TAKEN_CODES
            ]
        if failed:
            logger.warning(
                "a retry queue send counted as sent failed; sent again next flush",
                extra={"count": len(failed)},
            )
            with self._lock:
                self._resend.extend(failed)

    def _send_again(self) -> None:
        """Send again, within one budget, the work a late send failed for; what fails stays for the next
        flush (this work's records were checkpointed: the retry queue is its only way on)."""
        silent = self._queue_silent_until is not None and self._monotonic() < self._queue_silent_until
        if silent:
            return  # kept for a flush after the queue answers again
        with self._lock:
            items, self._resend = self._resend, []
        if not items:
            return
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cleanup-resend")
        try:
            future = pool.submit(park_many, self._sqs, self._queue_url, items)
            wait([future], timeout=self._budget)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        if future.done() and not future.cancelled() and future.exception() is None:
            codes = future.result()
            kept = [item for item, code in zip(items, codes, strict=True) if code is not None]
        else:
            kept = items
        self.stats.park_resent += len(items) - len(kept)
        if kept:
            with self._lock:
                self._resend.extend(kept)

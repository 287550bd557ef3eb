"""The consumer of one shard: decode, hand to handlers, flush, then checkpoint. Nothing else.

This is the pure core of the record processor; `pipeline.record_processor` adapts it to amazon-kclpy,
and the recovery commands (`pipeline.recovery`) run stored records through it too.

Every record of a window (the records since the last checkpoint) ends in exactly one place per handler:
- handled: given to the handler with `add` and made durable by its `flush`;
- quarantined (for every handler): it cannot be decoded; raw bytes and reason are kept;
- dead-lettered (for that handler alone): the handler's `add` raised `RecordRejected`, a rule broken by
  the record's own content; raw bytes, handler and reason are kept, and the other records and handlers
  carry on;
- parked (for that handler): any other exception from `add` or `flush` is transient. A `RetryableError`
  from `flush` is retried with backoff, unless it says `park_now` (the handler knows a retry now cannot
  help: its dependency did not answer within its budget); then the handler's unfinished records of the
  window (never a quarantined one, never one it dead-lettered) are parked as raw records and its pending
  work discarded.
  A record is never retried once it finished. A flush that fails after finishing part of the window
  says so by raising `schema.errors.FlushIncomplete` with the (shard, sequence number) of each event
  whose work ended (the finished sets of every attempt of that commit are united); the others are its
  unfinished records. A flush that fails with any other exception (or an `add` that failed) finished
  nothing: the handler's whole window is unfinished.
  A record finished by a producer is finished only once the sinks it feeds have flushed, since its
  outputs (the cleanup's outcomes) wait in their buffers. So when a sink cannot flush, each producer
  feeding it has every record of its window parked, the ones it had finished included: the sink's
  buffer, holding their outputs, is discarded, and replaying them is how the outputs are made again
  (handlers are idempotent: a cleanup replayed finds its account gone and records the outcome again).
  Either way nothing checkpoints past unhandled work, and no output is lost.

A handler that runs its work on lanes (`pipeline.lanes.LanedHandler`) may return from `flush` while some
records still run there (slow ones: one item's slow call must not delay the others). Those records are
neither finished nor parked: the consumer keeps them, from window to window, until a later flush finishes
or fails them, and checkpoints only the last record below the lowest one still running on any handler (no
checkpoint at all while the lowest is the first record after the last checkpoint). A window with nothing
new but work still running is committed on time as usual, to collect what ended. At the shard's end and
at a requested shutdown the consumer flushes again until nothing runs (up to `settle_seconds`): a shard
ends only with everything finished; a shutdown that cannot wait checkpoints below what still runs, and the
next owner handles it again. A lost lease abandons the running work (`LanedHandler.abandon`).

A checkpoint is taken only after every handler has flushed (or parked) everything before it, producers
before the sinks they feed. A checkpoint refused because this worker no longer holds the shard's lease
(`LeaseLost`) ends that shard's processing quietly: the window was flushed already and the new owner
resumes from the last checkpoint, so the records it gets again are handled again (handlers are
idempotent), and this consumer takes and checkpoints nothing more. Anything else unexpected stops the
process (`ConsumerCrash`), so the daemon restarts from the last checkpoint instead of moving past
unhandled work.
"""

from __future__ import annotations

__all__ = [
    "Checkpoint",
    "CommitPolicy",
    "ConsumerCrash",
    "Decoder",
    "DivertedRecord",
    "HandlerRetryPolicy",
    "LeaseLost",
    "ShardConsumer",
    "ShardStats",
    "WindowReport",
]

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_exponential_jitter

import telemetry
from pipeline._stored_records import safe_name
from pipeline.dead_letter import DeadLetters
from pipeline.events import StreamEvent
from pipeline.handlers import Handler, HandlerRegistry
from pipeline.handover import ReadResolver
from pipeline.lanes import LanedHandler, Position
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from schema import write_private_file
from schema.errors import EntitlementsError, FlushIncomplete, RecordContext, RecordRejected, RetryableError

logger = logging.getLogger(__name__)


class Decoder(Protocol):
    def __call__(
        self, data: bytes, *, stream_arn: str, shard_id: str, sequence_number: str | None = None
    ) -> StreamEvent: ...


class ConsumerCrash(EntitlementsError):
    """The consumer must stop without checkpointing; the daemon will redeliver from the last checkpoint."""


class LeaseLost(EntitlementsError):
    """Raised by a `Checkpoint` when the checkpoint is refused because this worker no longer holds the
    shard's lease: another worker owns the shard and resumes from the last checkpoint."""


@dataclass(frozen=True)
class CommitPolicy:
    every_records: int = 10_000
    interval_seconds: float = 5.0


@dataclass(frozen=True)
class HandlerRetryPolicy:
    attempts: int = 5
    max_seconds: float = 10.0
    initial_wait: float = 0.1
    max_wait: float = 2.0


@dataclass
class ShardStats:
    """What the consumer has seen on this shard since it started. Counts only: no personal data."""

    shard_id: str = ""
    records: int = 0
    events_by_type: Counter[str] = field(default_factory=Counter)
    quarantined: int = 0
    dead_lettered: int = 0
    parked_batches: int = 0
    checkpoints: int = 0
    last_sequence_number: str | None = None
    iterator_age_ms: float | None = None
    millis_behind_latest: int | None = None
    # Per read (empty ones too): now minus the newest handled record's creation time, and whether the
    # read was empty (the iterator at the stream's end). Read together: a quiet shard is old and caught up.
    newest_record_age_ms: float | None = None
    caught_up: bool = False
    # Records still running on a handler's lanes at the last commit: the checkpoint waits below them.
    running_on_lanes: int = 0

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "shard_id": self.shard_id,
                "records": self.records,
                "events_by_type": dict(self.events_by_type),
                "quarantined": self.quarantined,
                "dead_lettered": self.dead_lettered,
                "parked_batches": self.parked_batches,
                "checkpoints": self.checkpoints,
                "last_sequence_number": self.last_sequence_number,
                "iterator_age_ms": self.iterator_age_ms,
                "millis_behind_latest": self.millis_behind_latest,
                "newest_record_age_ms": self.newest_record_age_ms,
                "caught_up": self.caught_up,
                "running_on_lanes": self.running_on_lanes,
                "updated_at": datetime.now(UTC).isoformat(),
            },
            sort_keys=True,
        ).encode()


Checkpoint = Callable[[str | None], None]


@dataclass(frozen=True, slots=True)
class DivertedRecord:
    """Where one window's record went instead of being handled. `code` is the error's class name."""

    store: str  # "quarantine", "dead_letter" or "parked"
    sequence_number: str
    code: str
    handler: str | None = None  # None for the quarantine: no handler saw the record


@dataclass(frozen=True)
class WindowReport:
    """What one committed window did: how many records it took, and each one not handled."""

    records: int = 0
    stored: tuple[DivertedRecord, ...] = ()
    parked_files: tuple[Path, ...] = ()

    def codes(self) -> Counter[tuple[str, str]]:
        """(store, error code) -> records: what a log line may say about the failures."""
        return Counter((entry.store, entry.code) for entry in self.stored)


class ShardConsumer:
    def __init__(
        self,
        *,
        stream_arn: str,
        handlers: HandlerRegistry,
        decode: Decoder,
        quarantine: Quarantine,
        parked: ParkedWork,
        dead_letters: DeadLetters,
        stats_dir: Path | None = None,
        commit: CommitPolicy = CommitPolicy(),
        retry: HandlerRetryPolicy = HandlerRetryPolicy(),
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        settle_seconds: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        item_order: ReadResolver | None = None,
    ) -> None:
        self._stream_arn = stream_arn
        # A source without per-item order or exactly-once delivery (Kinesis), or a switch-over's
        # handover (pipeline.handover): each read resolved first.
        self._item_order = item_order
        # The order is fixed here, so a registry that names an unknown sink fails at build time.
        self._order = handlers.ordered()
        self._receivers = handlers.receivers()
        self._sinks = {handler.name: handlers.downstream(handler.name) for handler in self._order}
        self._decode = decode
        self._quarantine = quarantine
        self._parked = parked
        self._dead_letters = dead_letters
        self._stats_dir = stats_dir
        self._commit = commit
        self._retry = retry
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._settle_seconds = settle_seconds
        self._sleep = sleep
        self._shard_id = ""
        # The window: the records since the last checkpoint.
        self._window = 0  # records taken, quarantined ones included
        self._decoded: list[RawRecord] = []  # records handed to the handlers, in order
        self._rejected: dict[str, set[int]] = {}  # handler name -> indexes into _decoded it dead-lettered
        self._failed_adds: dict[str, str] = {}  # handler name -> error code of its first failed add
        self._stored: list[DivertedRecord] = []
        self._last_sequence: str | None = None
        # Every record taken since the last checkpoint, in order: the checkpoint goes below the lowest
        # one still running on a handler's lanes.
        self._taken: list[str] = []
        # Handler name -> the records of earlier windows still running on its lanes.
        self._carried: dict[str, list[RawRecord]] = {}
        self._last_commit_at = monotonic()
        self._lease_lost = False  # a checkpoint was refused for the lease: the shard is no longer ours
        self.stats = ShardStats()

    @property
    def shard_id(self) -> str:
        return self._shard_id

    def start(self, shard_id: str) -> None:
        self._shard_id = shard_id
        self.stats = ShardStats(shard_id=shard_id)
        self._newest_created_at: datetime | None = None
        self._last_commit_at = self._monotonic()
        logger.info("shard consumer started", extra={"shard": shard_id})

    def process(
        self, records: Sequence[RawRecord], checkpoint: Checkpoint, millis_behind_latest: int | None = None
    ) -> WindowReport | None:
        """Take the records; commit when the policy says so, returning that window's report. Once the
        lease was lost at a checkpoint, records are left to the shard's new owner."""
        if self._lease_lost:
            return None
        if self._item_order is None:
            for record in records:
                if (event := self._take(record)) is not None:
                    self._hand(record, event)
        else:  # bookkeeping in the stream's order, then the read's events as pipeline.item_order says
            taken = [(record, event) for record in records if (event := self._take(record)) is not None]
            for record, event in self._item_order.resolve(taken):
                self._hand(record, event)
        if records:
            telemetry.records_taken(len(records))
            if self.stats.iterator_age_ms is not None:
                telemetry.iterator_age(self.stats.iterator_age_ms / 1000.0)
        else:  # an empty read: nothing newer to take, the consumer is caught up
            telemetry.iterator_age(0.0)
        self.stats.millis_behind_latest = millis_behind_latest
        self._note_position(caught_up=not records)
        due_by_size = self._window >= self._commit.every_records
        due_by_time = self._monotonic() - self._last_commit_at >= self._commit.interval_seconds
        if (self._window or self._carrying()) and (due_by_size or due_by_time):
            return self.commit(checkpoint)
        return None

    def _note_position(self, *, caught_up: bool) -> None:
        """The shard's lag figures, refreshed on every read: while idle too (the adapter's own figure is
        null on an empty batch), so a silent shard's newest record keeps ageing where alarms see it."""
        age_seconds: float | None = None
        if self._newest_created_at is not None:
            age_seconds = max((self._wall_clock() - self._newest_created_at).total_seconds(), 0.0)
            self.stats.newest_record_age_ms = age_seconds * 1000.0
        self.stats.caught_up = caught_up
        telemetry.shard_position(self._shard_id, age_seconds, caught_up)

    def commit(self, checkpoint: Checkpoint, *, settle: bool = False) -> WindowReport:
        """Flush every handler (parking what one cannot flush), then checkpoint the last record taken,
        or the last below the lowest still running on a handler's lanes. With `settle`, flush again
        until nothing runs (up to `settle_seconds`) first."""
        report = WindowReport()
        if self._window or self._carrying():
            report = self._flush_window()
            if settle:
                report = self._settle(report)
            self._checkpoint_done(checkpoint)
        self._last_commit_at = self._monotonic()
        self._write_stats()
        return report

    def shutdown_requested(self, checkpoint: Checkpoint) -> None:
        self.commit(checkpoint, settle=True)

    def shard_ended(self, checkpoint: Checkpoint) -> None:
        """Flush (until nothing runs), then checkpoint with no sequence number: the shard is done and its
        children may start. Work still running after `settle_seconds` stops the process instead."""
        if self._lease_lost:
            return
        if self._window or self._carrying():
            self._settle(self._flush_window())
        if self._carrying():
            context = RecordContext(shard_id=self._shard_id, sequence_number=self._lowest_running())
            raise ConsumerCrash("shard ended with work still running on a handler's lanes", context=context)
        self._checkpoint(checkpoint, None)
        self._write_stats()

    def lease_lost(self) -> None:
        # Another worker owns the shard now; it resumes from our last checkpoint. Never checkpoint here.
        self._forget_everything()
        logger.info("lease lost", extra={"shard": self._shard_id})

    def _forget_everything(self) -> None:
        self._reset_window()
        for handler in self._order:
            handler.discard_pending()
        self._abandon_running()

    def _abandon_running(self) -> None:
        """The shard is no longer ours: what still runs on a handler's lanes is the new owner's to redo."""
        self._carried = {}
        self._taken = []
        for handler in self._order:
            if isinstance(handler, LanedHandler):
                handler.abandon()

    # -- internals ---------------------------------------------------------------------------------

    def _take(self, record: RawRecord) -> StreamEvent | None:
        self.stats.records += 1
        self._window += 1
        self._last_sequence = record.sequence_number
        self._taken.append(record.sequence_number)
        self.stats.last_sequence_number = record.sequence_number
        try:
            event = self._decode(
                record.data,
                stream_arn=self._stream_arn,
                shard_id=self._shard_id,
                sequence_number=record.sequence_number,
            )
        except Exception as error:  # any record we cannot type is kept, not dropped
            self._quarantine_record(record, error)
            return None
        return event

    def _hand(self, record: RawRecord, event: StreamEvent) -> None:
        index = len(self._decoded)
        self._decoded.append(record)
        self.stats.events_by_type[event.event_type.value] += 1
        age = self._wall_clock() - event.created_at
        self.stats.iterator_age_ms = max(age.total_seconds() * 1000.0, 0.0)
        if self._newest_created_at is None or event.created_at > self._newest_created_at:
            self._newest_created_at = event.created_at
        failed = self._failed_adds
        for handler in self._receivers:
            if failed and handler.name in failed:
                continue  # its whole window will be parked
            try:
                handler.add(event)
            except RecordRejected as error:
                self._dead_letter(handler.name, index, record, error)
            except Exception as error:
                # Transient: this handler's window is parked at commit; the other handlers carry on.
                failed[handler.name] = type(error).__name__
                logger.error(
                    "handler could not take an event; its window will be parked",
                    extra={"handler": handler.name, "error": type(error).__name__, **self._where(record)},
                )

    def _quarantine_record(self, record: RawRecord, error: Exception) -> None:
        self._quarantine.put(
            raw=record.data,
            reason=_reason(error),
            stream_arn=self._stream_arn,
            shard_id=self._shard_id,
            sequence_number=record.sequence_number,
        )
        code = type(error).__name__
        self._stored.append(DivertedRecord("quarantine", record.sequence_number, code))
        self.stats.quarantined += 1
        telemetry.quarantined()
        logger.warning("record quarantined", extra={"error": code, **self._where(record)})

    def _dead_letter(self, handler: str, index: int, record: RawRecord, error: RecordRejected) -> None:
        self._dead_letters.put(
            raw=record.data,
            reason=_reason(error),
            handler=handler,
            stream_arn=self._stream_arn,
            shard_id=self._shard_id,
            sequence_number=record.sequence_number,
        )
        self._rejected.setdefault(handler, set()).add(index)
        code = type(error).__name__
        self._stored.append(DivertedRecord("dead_letter", record.sequence_number, code, handler))
        self.stats.dead_lettered += 1
        telemetry.dead_lettered(handler)
        logger.warning(
            "record dead-lettered", extra={"handler": handler, "error": code, **self._where(record)}
        )

    def _flush_window(self) -> WindowReport:
        """Every handler flushed (or its unfinished records parked), producers before their sinks; then
        the producers of a sink that failed are parked too. Records still running on a handler's lanes
        are carried to the next window. The window starts anew."""
        failures: dict[str, _Failure] = {}
        running: dict[str, frozenset[Position]] = {}
        for handler in self._order:
            add_failure = self._failed_adds.get(handler.name)
            failure = _Failure(add_failure) if add_failure is not None else self._flush(handler)
            if failure is not None:
                failures[handler.name] = failure
                handler.discard_pending()
            running[handler.name] = _running_of(handler)
        parked_files: list[Path] = []
        for handler in self._order:
            name = handler.name
            own = failures.get(name)
            failed_sinks = [sink for sink in self._sinks[name] if sink in failures]
            still = running[name]
            if failed_sinks:
                # Its outputs did not become durable: every record replays (the finished ones too), and
                # their outputs with them. Those still running have handed nothing on yet: they stay.
                code = own.code if own is not None else failures[failed_sinks[0]].code
                reason = code if own is not None else f"sink {failed_sinks[0]} failed: {code}"
                finished: frozenset[tuple[str, str]] = frozenset()
            elif own is not None:
                code = reason = own.code
                finished = own.finished
            else:
                code = reason = ""
                finished = frozenset()
            if failed_sinks or own is not None:
                path = self._park(handler, reason=reason, code=code, finished=finished | still)
                if path is not None:
                    parked_files.append(path)
            self._carry(handler, still)
        report = WindowReport(
            records=self._window, stored=tuple(self._stored), parked_files=tuple(parked_files)
        )
        self._reset_window()
        self.stats.running_on_lanes = len(
            {record.sequence_number for records in self._carried.values() for record in records}
        )
        return report

    def _carry(self, handler: Handler, still: frozenset[Position]) -> None:
        """Keep the records of `handler` still running on its lanes, earlier windows' first."""
        if handler not in self._receivers:
            return
        shard = self._shard_id
        kept = [
            record
            for record in [*self._carried.get(handler.name, ()), *self._decoded]
            if (shard, record.sequence_number) in still
        ]
        if kept:
            self._carried[handler.name] = kept
        else:
            self._carried.pop(handler.name, None)

    def _carrying(self) -> bool:
        return any(self._carried.values())

    def _settle(self, report: WindowReport) -> WindowReport:
        """Flush again until no handler runs work on its lanes, or `settle_seconds` passed: the stored
        records and parked files of every round in one report."""
        stop_at = self._monotonic() + self._settle_seconds
        stored, parked = list(report.stored), list(report.parked_files)
        while self._carrying() and self._monotonic() < stop_at:
            self._sleep(0.02)  # a flush of nothing but running work returns at once
            again = self._flush_window()
            stored.extend(again.stored)
            parked.extend(again.parked_files)
        return WindowReport(records=report.records, stored=tuple(stored), parked_files=tuple(parked))

    def _lowest_running(self) -> str | None:
        running = {r.sequence_number for records in self._carried.values() for r in records}
        return next((sequence for sequence in self._taken if sequence in running), None)

    def _checkpoint_done(self, checkpoint: Checkpoint) -> None:
        """Checkpoint the last record taken, or the last below the lowest still running (none when that
        is the first record since the last checkpoint)."""
        lowest = self._lowest_running()
        if lowest is None:
            self._taken = []
            self._checkpoint(checkpoint, self._last_sequence)
            return
        index = self._taken.index(lowest)
        if index == 0:
            return
        sequence = self._taken[index - 1]
        self._taken = self._taken[index:]
        self._checkpoint(checkpoint, sequence)

    def _flush(self, handler: Handler) -> _Failure | None:
        """Flush, retrying a `RetryableError` with backoff (not one that says `park_now`: that parks at
        once); if it still fails, the error code and the events any attempt said it finished."""
        finished: set[tuple[str, str]] = set()
        started = self._monotonic()
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(self._retry.attempts) | stop_after_delay(self._retry.max_seconds),
                wait=wait_exponential_jitter(multiplier=self._retry.initial_wait, max=self._retry.max_wait),
                retry=retry_if_exception(_worth_retrying),
                reraise=True,
            ):
                with attempt:
                    try:
                        handler.flush()
                    except FlushIncomplete as error:
                        finished |= error.finished
                        raise
        except Exception as error:
            return _Failure(type(error).__name__, frozenset(finished))
        finally:
            telemetry.flush_duration(handler.name, max(self._monotonic() - started, 0.0))
        return None

    def _park(
        self, handler: Handler, *, reason: str, code: str, finished: frozenset[tuple[str, str]]
    ) -> Path | None:
        name = handler.name
        if handler not in self._receivers:
            return None  # flushed only: it was given none of these records
        rejected = self._rejected.get(name, ())
        shard = self._shard_id
        given = [
            *self._carried.get(name, ()),
            *(record for i, record in enumerate(self._decoded) if i not in rejected),
        ]
        owed = [record for record in given if (shard, record.sequence_number) not in finished]
        if not owed:
            return None
        path = self._parked.park(
            handler=name, stream_arn=self._stream_arn, shard_id=self._shard_id, records=owed, reason=reason
        )
        self._stored.extend(DivertedRecord("parked", r.sequence_number, code, name) for r in owed)
        self.stats.parked_batches += 1
        telemetry.parked(name, len(owed))
        logger.error(
            "handler could not finish its window; its records were parked",
            extra={"handler": name, "error": code, "shard": self._shard_id, "records": len(owed)},
        )
        return path

    def _reset_window(self) -> None:
        self._window = 0
        self._decoded = []
        self._rejected = {}
        self._failed_adds = {}
        self._stored = []

    def _checkpoint(self, checkpoint: Checkpoint, sequence_number: str | None) -> None:
        try:
            checkpoint(sequence_number)
        except LeaseLost:
            # Everything before it was flushed; the new owner resumes from the last checkpoint.
            self._lease_lost = True
            self._reset_window()  # flushed already: nothing pending to discard
            self._abandon_running()
            logger.info(
                "checkpoint refused: lease lost; shard processing ends", extra={"shard": self._shard_id}
            )
            return
        except Exception as error:
            context = RecordContext(shard_id=self._shard_id, sequence_number=sequence_number)
            raise ConsumerCrash(f"checkpoint failed: {type(error).__name__}", context=context) from error
        self.stats.checkpoints += 1
        telemetry.checkpointed()
        logger.info(
            "checkpointed",
            extra={
                "shard": self._shard_id,
                "sequence_number": sequence_number,
                "iterator_age_ms": self.stats.iterator_age_ms,
                "quarantined": self.stats.quarantined,
                "dead_lettered": self.stats.dead_lettered,
                "parked_batches": self.stats.parked_batches,
            },
        )

    def _write_stats(self) -> None:
        if self._stats_dir is not None:
            write_private_file(self._stats_dir / f"{safe_name(self._shard_id)}.json", self.stats.to_json())

    def _where(self, record: RawRecord) -> dict[str, str]:
        return {"shard": self._shard_id, "sequence_number": record.sequence_number}


@dataclass(frozen=True, slots=True)
class _Failure:
    """Why a handler could not finish its window, and the events it finished all the same."""

    code: str
    finished: frozenset[tuple[str, str]] = frozenset()


def _running_of(handler: Handler) -> frozenset[Position]:
    """The records still running on a laned handler's lanes; none for any other handler."""
    return handler.running() if isinstance(handler, LanedHandler) else frozenset()


def _worth_retrying(error: BaseException) -> bool:
    """A retryable error whose raiser did not ask for the work to be parked at once."""
    return isinstance(error, RetryableError) and not error.park_now


def _reason(error: Exception) -> str:
    """What is stored beside a record: our own errors' words (they hold no data) without the position
    (stored beside it already, and it would make every reason unique), else the class name."""
    if not isinstance(error, EntitlementsError):
        return type(error).__name__
    text = str(error)
    suffix = f" [{error.context}]"
    return text.removesuffix(suffix) if str(error.context) else text

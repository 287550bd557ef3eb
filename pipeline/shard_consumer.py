"""The consumer of one shard: decode, hand to handlers, flush, then checkpoint. Nothing else.

This is the pure core of the record processor; `pipeline.record_processor` adapts it to amazon-kclpy.

Rules it keeps:
- A record that cannot be decoded is quarantined (raw bytes and reason) and counted; never skipped.
- A checkpoint is taken only after every handler has flushed everything before it.
- A handler's transient failure is retried with backoff; one that still fails has the window's raw
  records parked durably and its pending work discarded, so the shard moves on and nothing is lost.
- Anything else unexpected stops the process (`ConsumerCrash`), so the daemon restarts from the last
  checkpoint instead of moving past unhandled work.
"""

from __future__ import annotations

__all__ = ["CommitPolicy", "ConsumerCrash", "Decoder", "RetryPolicy", "ShardConsumer", "ShardStats"]

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_exponential_jitter

from pipeline._files import write_private_file
from pipeline.events import StreamEvent
from pipeline.handlers import Handler, HandlerRegistry
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine, safe_name
from schema.errors import EntitlementsError, RecordContext, RetryableError

logger = logging.getLogger(__name__)


class Decoder(Protocol):
    def __call__(
        self, data: bytes, *, stream_arn: str, shard_id: str, sequence_number: str | None = None
    ) -> StreamEvent: ...


class ConsumerCrash(EntitlementsError):
    """The consumer must stop without checkpointing; the daemon will redeliver from the last checkpoint."""


@dataclass(frozen=True)
class CommitPolicy:
    every_records: int = 10_000
    interval_seconds: float = 5.0


@dataclass(frozen=True)
class RetryPolicy:
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
    parked_batches: int = 0
    checkpoints: int = 0
    last_sequence_number: str | None = None
    iterator_age_ms: float | None = None
    millis_behind_latest: int | None = None

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "shard_id": self.shard_id,
                "records": self.records,
                "events_by_type": dict(self.events_by_type),
                "quarantined": self.quarantined,
                "parked_batches": self.parked_batches,
                "checkpoints": self.checkpoints,
                "last_sequence_number": self.last_sequence_number,
                "iterator_age_ms": self.iterator_age_ms,
                "millis_behind_latest": self.millis_behind_latest,
                "updated_at": datetime.now(UTC).isoformat(),
            },
            sort_keys=True,
        ).encode()


Checkpoint = Callable[[str | None], None]


class ShardConsumer:
    def __init__(
        self,
        *,
        stream_arn: str,
        handlers: HandlerRegistry,
        decode: Decoder,
        quarantine: Quarantine,
        parked: ParkedWork,
        stats_dir: Path | None = None,
        commit: CommitPolicy = CommitPolicy(),
        retry: RetryPolicy = RetryPolicy(),
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._stream_arn = stream_arn
        self._handlers = handlers
        self._decode = decode
        self._quarantine = quarantine
        self._parked = parked
        self._stats_dir = stats_dir
        self._commit = commit
        self._retry = retry
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._shard_id = ""
        self._pending: list[RawRecord] = []  # records since the last checkpoint, for parking
        self._failed_adds: dict[str, str] = {}  # handler name -> error class, since the last flush
        self._last_sequence: str | None = None
        self._last_commit_at = monotonic()
        self.stats = ShardStats()

    @property
    def shard_id(self) -> str:
        return self._shard_id

    def start(self, shard_id: str) -> None:
        self._shard_id = shard_id
        self.stats = ShardStats(shard_id=shard_id)
        self._last_commit_at = self._monotonic()
        logger.info("shard consumer started", extra={"shard": shard_id})

    def process(
        self, records: Sequence[RawRecord], checkpoint: Checkpoint, millis_behind_latest: int | None = None
    ) -> None:
        for record in records:
            self._take(record)
        self.stats.millis_behind_latest = millis_behind_latest
        due_by_size = len(self._pending) >= self._commit.every_records
        due_by_time = self._monotonic() - self._last_commit_at >= self._commit.interval_seconds
        if self._pending and (due_by_size or due_by_time):
            self.commit(checkpoint)

    def commit(self, checkpoint: Checkpoint) -> None:
        """Flush every handler (parking what one cannot flush), then checkpoint the last record taken."""
        if self._pending:
            self._flush_pending()
            self._checkpoint(checkpoint, self._last_sequence)
        self._last_commit_at = self._monotonic()
        self._write_stats()

    def shutdown_requested(self, checkpoint: Checkpoint) -> None:
        self.commit(checkpoint)

    def shard_ended(self, checkpoint: Checkpoint) -> None:
        """Flush, then checkpoint with no sequence number: the shard is done and its children may start."""
        if self._pending:
            self._flush_pending()
        self._checkpoint(checkpoint, None)
        self._write_stats()

    def lease_lost(self) -> None:
        # Another worker owns the shard now; it resumes from our last checkpoint. Never checkpoint here.
        self._pending.clear()
        for handler in self._handlers:
            handler.discard_pending()
        logger.info("lease lost", extra={"shard": self._shard_id})

    # -- internals ---------------------------------------------------------------------------------

    def _take(self, record: RawRecord) -> None:
        self.stats.records += 1
        self._pending.append(record)
        self._last_sequence = record.sequence_number
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
            return
        self.stats.events_by_type[event.event_type.value] += 1
        age = self._wall_clock() - event.created_at
        self.stats.iterator_age_ms = max(age.total_seconds() * 1000.0, 0.0)
        for handler in self._handlers:
            if handler.name in self._failed_adds:
                continue
            try:
                handler.add(event)
            except Exception as error:
                # The handler will be parked at commit; the other handlers carry on.
                self._failed_adds[handler.name] = type(error).__name__
                logger.error(
                    "handler refused an event",
                    extra={"handler": handler.name, "error": type(error).__name__, **self._where(record)},
                )

    def _quarantine_record(self, record: RawRecord, error: Exception) -> None:
        reason = str(error) if isinstance(error, EntitlementsError) else type(error).__name__
        self._quarantine.put(
            raw=record.data,
            reason=reason,
            stream_arn=self._stream_arn,
            shard_id=self._shard_id,
            sequence_number=record.sequence_number,
        )
        self.stats.quarantined += 1
        logger.warning("record quarantined", extra={"error": type(error).__name__, **self._where(record)})

    def _flush_pending(self) -> None:
        """Every handler flushed (or its records parked) in registration order; the window starts anew."""
        for handler in self._handlers:
            self._flush_or_park(handler)
        self._pending.clear()
        self._failed_adds.clear()

    def _flush_or_park(self, handler: Handler) -> None:
        failure = self._failed_adds.get(handler.name)
        if failure is None:
            try:
                for attempt in Retrying(
                    stop=stop_after_attempt(self._retry.attempts) | stop_after_delay(self._retry.max_seconds),
                    wait=wait_exponential_jitter(
                        multiplier=self._retry.initial_wait, max=self._retry.max_wait
                    ),
                    retry=retry_if_exception_type(RetryableError),
                    reraise=True,
                ):
                    with attempt:
                        handler.flush()
                return
            except Exception as error:
                failure = type(error).__name__
        self._parked.park(
            handler=handler.name,
            stream_arn=self._stream_arn,
            shard_id=self._shard_id,
            records=self._pending,
            reason=failure,
        )
        handler.discard_pending()
        self.stats.parked_batches += 1
        logger.error(
            "handler could not flush; its records were parked",
            extra={
                "handler": handler.name,
                "error": failure,
                "shard": self._shard_id,
                "records": len(self._pending),
            },
        )

    def _checkpoint(self, checkpoint: Checkpoint, sequence_number: str | None) -> None:
        try:
            checkpoint(sequence_number)
        except Exception as error:
            context = RecordContext(shard_id=self._shard_id, sequence_number=sequence_number)
            raise ConsumerCrash(f"checkpoint failed: {type(error).__name__}", context=context) from error
        self.stats.checkpoints += 1
        logger.info(
            "checkpointed",
            extra={
                "shard": self._shard_id,
                "sequence_number": sequence_number,
                "iterator_age_ms": self.stats.iterator_age_ms,
                "quarantined": self.stats.quarantined,
                "parked_batches": self.stats.parked_batches,
            },
        )

    def _write_stats(self) -> None:
        if self._stats_dir is not None:
            write_private_file(self._stats_dir / f"{safe_name(self._shard_id)}.json", self.stats.to_json())

    def _where(self, record: RawRecord) -> dict[str, str]:
        return {"shard": self._shard_id, "sequence_number": record.sequence_number}

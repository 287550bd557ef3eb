"""Recovery of stored records through the consumer's own path: parked work, quarantine, dead letters.

Each stored record runs through a `ShardConsumer` exactly as it would from the stream (decode, `add`,
`flush`, producers before their sinks), so it ends in the same places a live record can:
- `replay_parked`: each parked batch goes to the handler that could not finish it, and the sinks that
  handler feeds (the lake) are flushed after it, before the batch is removed. A record that cannot be
  decoded is quarantined (idempotently) and skipped; one the handler now rejects is dead-lettered; the
  rest replay. A batch whose work fails again stays parked (or is replaced by what is still unfinished).
- `redrive_quarantine`: quarantined records (after a decoder fix) go to every handler; each one that
  decodes now is removed from the quarantine (it is handled, or stored elsewhere by the consumer).
- `redrive_dead_letters`: dead letters (after a handler fix) go to the handler that refused them, with
  its sinks flushed after it; each one no longer refused is removed.

Failures are reported and logged by store and error code with counts, never with content. Export
writes the stored records to a new owner-only file for inspection: they never go into a log.
"""

from __future__ import annotations

__all__ = ["Recovery", "RecoveryReport", "export_stored", "reason_counts"]

import base64
import json
import logging
import math
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pipeline.dead_letter import DeadLetter, DeadLetters
from pipeline.handlers import HandlerRegistry
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine, QuarantinedRecord
from pipeline.shard_consumer import CommitPolicy, Decoder, HandlerRetryPolicy, ShardConsumer, WindowReport

logger = logging.getLogger(__name__)

_Stored = TypeVar("_Stored", QuarantinedRecord, DeadLetter)

# Everything stored is replayed as one window: one flush, one report.
_ONE_WINDOW = CommitPolicy(every_records=2**62, interval_seconds=math.inf)


@dataclass
class RecoveryReport:
    """One recovery run: stored items finished (and removed), items still stored, failures by code."""

    finished: int = 0
    remaining: int = 0
    failures: Counter[tuple[str, str]] = field(default_factory=Counter)  # (store, code) -> records

    def log(self, run: str) -> None:
        for (store, code), records in sorted(self.failures.items()):
            logger.warning(
                "recovery left records unhandled",
                extra={"run": run, "store": store, "error": code, "records": records},
            )
        logger.info(
            "recovery done", extra={"run": run, "finished": self.finished, "remaining": self.remaining}
        )


class Recovery:
    def __init__(
        self,
        *,
        handlers: HandlerRegistry,
        decode: Decoder,
        quarantine: Quarantine,
        parked: ParkedWork,
        dead_letters: DeadLetters,
        retry: HandlerRetryPolicy | None = None,
    ) -> None:
        handlers.ordered()  # an unknown sink or a cycle fails here, before anything is touched
        self._handlers = handlers
        self._decode = decode
        self._quarantine = quarantine
        self._parked = parked
        self._dead_letters = dead_letters
        self._retry = retry or HandlerRetryPolicy()

    def replay_parked(self, progress: Callable[[int, int], None] | None = None) -> RecoveryReport:
        """Every parked batch again; `progress(done, total)` is called after each (a command's bar)."""
        report = RecoveryReport()
        batches = list(self._parked)
        for done, batch in enumerate(batches, start=1):
            if progress is not None:
                progress(done - 1, len(batches))
            if batch.handler not in self._handlers:
                report.remaining += 1
                report.failures["parked", "UnknownHandler"] += len(batch.records)
                continue
            window = self._run(
                self._handlers.replaying(batch.handler), batch.stream_arn, batch.shard_id, batch.records
            )
            report.failures.update(window.codes())
            # A batch whose unfinished records are exactly its own was parked again onto its own file.
            if any(_same_file(path, batch.path) for path in window.parked_files):
                report.remaining += 1
                continue
            self._parked.remove(batch)
            report.finished += 1
            report.remaining += len(window.parked_files)
        if progress is not None:
            progress(len(batches), len(batches))
        report.log("replay-parked")
        return report

    def redrive_quarantine(self) -> RecoveryReport:
        report = RecoveryReport()
        groups: dict[tuple[str, str], list[QuarantinedRecord]] = defaultdict(list)
        for record in self._quarantine:
            groups[record.stream_arn, record.shard_id].append(record)
        for (stream_arn, shard_id), records in groups.items():
            window = self._run(self._handlers, stream_arn, shard_id, _raw(records))
            report.failures.update(window.codes())
            still = {entry.sequence_number for entry in window.stored if entry.store == "quarantine"}
            _settle(report, records, still, self._quarantine.remove)
        report.log("quarantine-redrive")
        return report

    def redrive_dead_letters(self, handler: str | None = None) -> RecoveryReport:
        report = RecoveryReport()
        groups: dict[tuple[str, str, str], list[DeadLetter]] = defaultdict(list)
        for letter in self._dead_letters:
            if handler is None or letter.handler == handler:
                groups[letter.handler, letter.stream_arn, letter.shard_id].append(letter)
        for (name, stream_arn, shard_id), letters in groups.items():
            if name not in self._handlers:
                report.remaining += len(letters)
                report.failures["dead_letter", "UnknownHandler"] += len(letters)
                continue
            window = self._run(self._handlers.replaying(name), stream_arn, shard_id, _raw(letters))
            report.failures.update(window.codes())
            still = {
                entry.sequence_number
                for entry in window.stored
                if entry.store == "dead_letter" and entry.handler == name
            }
            _settle(report, letters, still, self._dead_letters.remove)
        report.log("dead-letter-redrive")
        return report

    def _run(
        self, handlers: HandlerRegistry, stream_arn: str, shard_id: str, records: Sequence[RawRecord]
    ) -> WindowReport:
        consumer = ShardConsumer(
            stream_arn=stream_arn,
            handlers=handlers,
            decode=self._decode,
            quarantine=self._quarantine,
            parked=self._parked,
            dead_letters=self._dead_letters,
            commit=_ONE_WINDOW,
            retry=self._retry,
        )
        consumer.start(shard_id)
        consumer.process(records, _no_checkpoint)
        return consumer.commit(_no_checkpoint, settle=True)  # nothing left running on a handler's lanes


def reason_counts(records: Iterable[QuarantinedRecord | DeadLetter]) -> Counter[tuple[str, str]]:
    """(handler, reason) -> records; the handler is "" for the quarantine. Reasons are words only."""
    return Counter(
        (record.handler if isinstance(record, DeadLetter) else "", record.reason) for record in records
    )


def export_stored(records: Iterable[QuarantinedRecord | DeadLetter], destination: Path) -> int:
    """Write the records as JSON lines to a new file only its owner can read (0600); never overwrite.
    Returns how many were written. Raises `FileExistsError` if `destination` exists."""
    fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    written = 0
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            for record in records:
                out.write(json.dumps(_exported(record), sort_keys=True).encode() + b"\n")
                written += 1
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        destination.unlink(missing_ok=True)
        raise
    return written


def _exported(record: QuarantinedRecord | DeadLetter) -> dict[str, str]:
    document = {
        "reason": record.reason,
        "stream_arn": record.stream_arn,
        "shard_id": record.shard_id,
        "sequence_number": record.sequence_number,
        "raw_base64": base64.b64encode(record.raw).decode("ascii"),
    }
    if isinstance(record, DeadLetter):
        document |= {"handler": record.handler, "dead_lettered_at": record.dead_lettered_at}
    else:
        document |= {"quarantined_at": record.quarantined_at}
    return document


def _settle(
    report: RecoveryReport, records: Iterable[_Stored], still: set[str], remove: Callable[[_Stored], None]
) -> None:
    """Count each record whose sequence number is `still` stored as remaining; remove each other one
    from its store and count it finished."""
    for record in records:
        if record.sequence_number in still:
            report.remaining += 1
        else:
            remove(record)
            report.finished += 1


def _raw(records: Iterable[QuarantinedRecord | DeadLetter]) -> list[RawRecord]:
    return [RawRecord(record.raw, record.sequence_number) for record in records]


def _same_file(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def _no_checkpoint(sequence_number: str | None) -> None:
    """Stored records have no stream position to commit: they left the stream when they were stored."""

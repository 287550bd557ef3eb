"""Fakes shared by the consumer and recovery tests: a decoder of plain payloads and scripted handlers.

A payload is the record's text: `bad...` cannot be decoded; `poison...` is refused by a `Recorder`'s
`add` (`RecordRejected`); anything else decodes into an event whose id is the payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.dead_letter import DeadLetters
from pipeline.events import EventType
from pipeline.handlers import HandlerRegistry
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from pipeline.shard_consumer import CommitPolicy, HandlerRetryPolicy, ShardConsumer
from schema.errors import FlushIncomplete, RecordRejected, TerminalError

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"
FAST_RETRY = HandlerRetryPolicy(attempts=3, max_seconds=5, initial_wait=0.001, max_wait=0.002)


@dataclass(frozen=True)
class FakeEvent:
    """What the consumer reads of an event: its type and time; handlers here read its id."""

    event_id: str
    event_type: EventType = EventType.UNKNOWN_ITEM
    created_at: datetime = datetime(2026, 1, 1, tzinfo=UTC)


def fake_decode(data: bytes, *, stream_arn: str, shard_id: str, sequence_number: str | None = None) -> Any:
    if data.startswith(b"bad"):
        raise TerminalError("record is not JSON")
    return FakeEvent(data.decode())


class Recorder:
    """A handler that records calls into a shared log; can be told to fail its flushes or adds."""

    def __init__(
        self,
        name: str,
        log: list[str] | None = None,
        failures: list[Exception] | None = None,
        add_failures: dict[str, Exception] | None = None,
        sink: Recorder | None = None,
    ) -> None:
        self.name = name
        self.log = log if log is not None else []
        self.failures = list(failures or [])
        self.add_failures = dict(add_failures or {})
        self.sink = sink  # given "out:<id>" for each event this handler flushes
        self.pending: list[str] = []
        self.flushed: list[str] = []
        self.outputs: list[str] = []

    def add(self, event: Any) -> None:
        if event.event_id.startswith("poison"):
            raise RecordRejected("the record names no account")
        failure = self.add_failures.pop(event.event_id, None)
        if failure is not None:
            raise failure
        self.pending.append(event.event_id)

    def add_output(self, output: str) -> None:
        self.outputs.append(output)

    def flush(self) -> None:
        self.log.append(f"flush:{self.name}")
        if self.failures:
            raise self.failures.pop(0)
        if self.sink is not None:
            for event_id in self.pending:
                self.sink.add_output(f"out:{event_id}")
        self.flushed.extend(self.pending)
        self.pending.clear()
        self.flushed.extend(self.outputs)
        self.outputs.clear()

    def discard_pending(self) -> None:
        self.log.append(f"discard:{self.name}")
        self.pending.clear()


class PartlyFinishing(Recorder):
    """A handler whose flush attempts each finish the events named (hands their outputs to its sink),
    then fail: with `FlushIncomplete` naming every event finished since its last success, or, for an
    attempt scripted as None, with a plain error that names nothing."""

    def __init__(self, name: str, attempts: list[set[str] | None], sink: Recorder | None = None) -> None:
        super().__init__(name, sink=sink)
        self.attempts = list(attempts)
        self.done: set[str] = set()

    def flush(self) -> None:
        self.log.append(f"flush:{self.name}")
        finishing = self.attempts.pop(0)
        if finishing is None:
            raise OSError("the queue went away")
        for event_id in finishing:
            self.pending.remove(event_id)
            if self.sink is not None:
                self.sink.add_output(f"out:{event_id}")
        self.done |= finishing
        # records("e1", "e2", ...) numbers them 100, 101, ...
        positions = frozenset(("shardId-1", str(99 + int(event_id[1:]))) for event_id in self.done)
        raise FlushIncomplete("some work could not be handed on", finished=positions)


@dataclass(frozen=True)
class Stores:
    quarantine: Quarantine
    parked: ParkedWork
    dead_letters: DeadLetters

    @classmethod
    def under(cls, root: Path) -> Stores:
        return cls(Quarantine(root / "quarantine"), ParkedWork(root / "parked"), DeadLetters(root / "dead"))


def registry_of(*handlers: Recorder, feeds: dict[str, tuple[str, ...]] | None = None) -> HandlerRegistry:
    registry = HandlerRegistry()
    for handler in handlers:
        registry.register(handler, feeds=(feeds or {}).get(handler.name, ()))
    return registry


def make_consumer(
    tmp_path: Path,
    *handlers: Recorder,
    every: int = 1,
    feeds: dict[str, tuple[str, ...]] | None = None,
) -> ShardConsumer:
    stores = Stores.under(tmp_path)
    consumer = ShardConsumer(
        stream_arn=STREAM,
        handlers=registry_of(*handlers, feeds=feeds),
        decode=fake_decode,
        quarantine=stores.quarantine,
        parked=stores.parked,
        dead_letters=stores.dead_letters,
        stats_dir=tmp_path / "stats",
        commit=CommitPolicy(every_records=every, interval_seconds=3600),
        retry=FAST_RETRY,
    )
    consumer.start("shardId-1")
    return consumer


def records(*payloads: str) -> list[RawRecord]:
    return [RawRecord(p.encode(), str(100 + i)) for i, p in enumerate(payloads)]

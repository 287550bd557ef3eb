"""The shard consumer: flush before checkpoint, quarantine, parking, and the lifecycle calls."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.events import EventType, StreamEvent, UnknownItemChanged
from pipeline.handlers import HandlerRegistry
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from pipeline.shard_consumer import CommitPolicy, ConsumerCrash, RetryPolicy, ShardConsumer
from schema.errors import RetryableError, TerminalError

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"
# AWS sequence numbers run to 40 digits; they must pass through as the exact string.
LONG_SEQ = "4" * 40


def fake_decode(
    data: bytes, *, stream_arn: str, shard_id: str, sequence_number: str | None = None
) -> StreamEvent:
    if data.startswith(b"bad"):
        raise TerminalError("record is not JSON")
    return UnknownItemChanged.model_validate(
        {
            "event_id": data.decode(),
            "change": "MODIFY",
            "position": {"stream_arn": stream_arn, "shard_id": shard_id, "sequence_number": sequence_number},
            "created_at": datetime(2026, 1, 1, tzinfo=UTC),
            "keys": {},
            "item_kind": "unknown",
            "user_id": None,
        },
        strict=False,
    )


class Recorder:
    """A handler that records calls into a shared log; can be told to fail."""

    def __init__(self, name: str, log: list[str], failures: list[Exception] | None = None) -> None:
        self.name = name
        self.log = log
        self.failures = list(failures or [])
        self.pending: list[str] = []
        self.flushed: list[str] = []

    def add(self, event: StreamEvent) -> None:
        self.pending.append(event.event_id)

    def flush(self) -> None:
        self.log.append(f"flush:{self.name}")
        if self.failures:
            raise self.failures.pop(0)
        self.flushed.extend(self.pending)
        self.pending.clear()

    def discard_pending(self) -> None:
        self.log.append(f"discard:{self.name}")
        self.pending.clear()


def make_consumer(tmp_path: Path, *handlers: Recorder, every: int = 1) -> ShardConsumer:
    registry = HandlerRegistry()
    for handler in handlers:
        registry.register(handler)
    consumer = ShardConsumer(
        stream_arn=STREAM,
        handlers=registry,
        decode=fake_decode,
        quarantine=Quarantine(tmp_path / "quarantine"),
        parked=ParkedWork(tmp_path / "parked"),
        stats_dir=tmp_path / "stats",
        commit=CommitPolicy(every_records=every, interval_seconds=3600),
        retry=RetryPolicy(attempts=3, max_seconds=5, initial_wait=0.001, max_wait=0.002),
    )
    consumer.start("shardId-1")
    return consumer


def records(*payloads: str) -> list[RawRecord]:
    return [RawRecord(p.encode(), str(100 + i)) for i, p in enumerate(payloads)]


def test_checkpoint_follows_the_flush_of_every_handler(tmp_path: Path) -> None:
    log: list[str] = []
    consumer = make_consumer(tmp_path, Recorder("a", log), Recorder("b", log), every=2)
    consumer.process(records("e1", "e2"), lambda seq: log.append(f"checkpoint:{seq}"))
    assert log == ["flush:a", "flush:b", "checkpoint:101"]


def test_no_checkpoint_before_the_commit_is_due(tmp_path: Path) -> None:
    log: list[str] = []
    consumer = make_consumer(tmp_path, Recorder("a", log), every=3)
    consumer.process(records("e1", "e2"), lambda seq: log.append(f"checkpoint:{seq}"))
    assert log == []


def test_sequence_number_is_checkpointed_as_the_exact_string(tmp_path: Path) -> None:
    seen: list[str | None] = []
    consumer = make_consumer(tmp_path, Recorder("a", []))
    consumer.process([RawRecord(b"e1", LONG_SEQ)], seen.append)
    assert seen == [LONG_SEQ]


def test_undecodable_record_is_quarantined_with_raw_bytes_and_reason(tmp_path: Path) -> None:
    handler = Recorder("a", [])
    consumer = make_consumer(tmp_path, handler, every=2)
    consumer.process(records("e1", "bad-bytes\x00"), lambda seq: None)
    [kept] = list(Quarantine(tmp_path / "quarantine"))
    assert kept.raw == b"bad-bytes\x00"
    assert kept.reason == "record is not JSON"
    assert (kept.shard_id, kept.sequence_number, kept.stream_arn) == ("shardId-1", "101", STREAM)
    assert consumer.stats.quarantined == 1
    assert handler.flushed == ["e1"]


def test_quarantine_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    consumer = make_consumer(tmp_path, Recorder("a", []))
    consumer.process(records("bad"), lambda seq: None)
    [path] = (tmp_path / "quarantine").glob("*/*.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_transient_flush_failure_is_retried_without_parking(tmp_path: Path) -> None:
    log: list[str] = []
    handler = Recorder("a", log, failures=[RetryableError("throttled")])
    consumer = make_consumer(tmp_path, handler)
    consumer.process(records("e1"), lambda seq: log.append("checkpoint"))
    assert log == ["flush:a", "flush:a", "checkpoint"]
    assert ParkedWork(tmp_path / "parked").count() == 0


def test_handler_that_cannot_flush_has_its_records_parked_and_the_shard_moves_on(tmp_path: Path) -> None:
    log: list[str] = []
    failing = Recorder("lake", log, failures=[TerminalError("disk full")])
    healthy = Recorder("journal", log)
    consumer = make_consumer(tmp_path, failing, healthy, every=2)
    consumer.process(records("e1", "e2"), lambda seq: log.append(f"checkpoint:{seq}"))
    assert log == ["flush:lake", "discard:lake", "flush:journal", "checkpoint:101"]
    [batch] = list(ParkedWork(tmp_path / "parked"))
    assert batch.handler == "lake"
    assert [r.data for r in batch.records] == [b"e1", b"e2"]
    assert healthy.flushed == ["e1", "e2"]


def test_exhausted_retries_park_the_work(tmp_path: Path) -> None:
    handler = Recorder("a", [], failures=[RetryableError("x")] * 10)
    consumer = make_consumer(tmp_path, handler)
    consumer.process(records("e1"), lambda seq: None)
    assert ParkedWork(tmp_path / "parked").count() == 1
    assert consumer.stats.parked_batches == 1


def test_lease_lost_never_checkpoints(tmp_path: Path) -> None:
    log: list[str] = []
    consumer = make_consumer(tmp_path, Recorder("a", log), every=10)
    consumer.process(records("e1"), lambda seq: log.append("checkpoint"))
    consumer.lease_lost()
    assert "checkpoint" not in log
    assert log == ["discard:a"]


def test_shutdown_requested_checkpoints_what_was_flushed(tmp_path: Path) -> None:
    log: list[str] = []
    consumer = make_consumer(tmp_path, Recorder("a", log), every=10)
    consumer.process(records("e1", "e2"), lambda seq: log.append(f"checkpoint:{seq}"))
    consumer.shutdown_requested(lambda seq: log.append(f"checkpoint:{seq}"))
    assert log == ["flush:a", "checkpoint:101"]


def test_shard_end_flushes_then_checkpoints_with_no_sequence(tmp_path: Path) -> None:
    log: list[str] = []
    consumer = make_consumer(tmp_path, Recorder("a", log), every=10)
    consumer.process(records("e1"), lambda seq: log.append(f"checkpoint:{seq}"))
    consumer.shard_ended(lambda seq: log.append(f"checkpoint:{seq}"))
    assert log == ["flush:a", "checkpoint:None"]


def test_failed_checkpoint_stops_the_consumer(tmp_path: Path) -> None:
    def refuse(seq: str | None) -> None:
        raise RuntimeError("ThrottlingException")

    consumer = make_consumer(tmp_path, Recorder("a", []))
    with pytest.raises(ConsumerCrash):
        consumer.process(records("e1"), refuse)


def test_stats_count_events_by_type(tmp_path: Path) -> None:
    consumer = make_consumer(tmp_path, Recorder("a", []), every=2)
    consumer.process(records("e1", "e2"), lambda seq: None)
    assert consumer.stats.events_by_type == {EventType.UNKNOWN_ITEM.value: 2}
    assert (tmp_path / "stats" / "shardId-1.json").exists()

"""The shard consumer: flush before checkpoint, and every record ends in exactly one place per handler:
handled, quarantined, dead-lettered or parked."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from pipeline.dead_letter import DeadLetters
from pipeline.errors import DecodeError
from pipeline.events import EventType
from pipeline.handlers import HandlerRegistry
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from pipeline.shard_consumer import ConsumerCrash, LeaseLost, ShardConsumer
from schema.errors import RecordContext, RetryableError, TerminalError
from tests.pipeline._consumer_fakes import (
    STREAM,
    PartlyFinishing,
    Recorder,
    Stores,
    fake_decode,
    make_consumer,
    records,
)

# AWS sequence numbers run to 40 digits; they must pass through as the exact string.
LONG_SEQ = "4" * 40


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
    consumer = make_consumer(tmp_path, Recorder("a"))
    consumer.process([RawRecord(b"e1", LONG_SEQ)], seen.append)
    assert seen == [LONG_SEQ]


def test_undecodable_record_is_quarantined_with_raw_bytes_and_reason(tmp_path: Path) -> None:
    handler = Recorder("a")
    consumer = make_consumer(tmp_path, handler, every=2)
    consumer.process(records("e1", "bad-bytes\x00"), lambda seq: None)
    [kept] = list(Quarantine(tmp_path / "quarantine"))
    assert kept.raw == b"bad-bytes\x00"
    assert kept.reason == "record is not JSON"
    assert (kept.shard_id, kept.sequence_number, kept.stream_arn) == ("shardId-1", "101", STREAM)
    assert consumer.stats.quarantined == 1
    assert handler.flushed == ["e1"]


def test_the_stored_reason_is_the_errors_words_without_its_stream_position(tmp_path: Path) -> None:
    def decode(data: bytes, **_: object) -> object:
        raise DecodeError("N has more than 38 significant digits", context=RecordContext("s", "100", "e1"))

    stores = Stores.under(tmp_path)
    consumer = ShardConsumer(
        stream_arn=STREAM,
        handlers=HandlerRegistry(),
        decode=decode,  # type: ignore[arg-type]
        quarantine=stores.quarantine,
        parked=stores.parked,
        dead_letters=stores.dead_letters,
    )
    consumer.start("shardId-1")
    consumer.process(records("e1"), lambda seq: None)
    assert [record.reason for record in stores.quarantine] == ["N has more than 38 significant digits"]


def test_a_window_of_quarantined_records_only_is_still_checkpointed(tmp_path: Path) -> None:
    log: list[str] = []
    consumer = make_consumer(tmp_path, Recorder("a", log))
    consumer.process(records("bad"), lambda seq: log.append(f"checkpoint:{seq}"))
    assert log[-1] == "checkpoint:100"


def test_quarantine_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    consumer = make_consumer(tmp_path, Recorder("a"))
    consumer.process(records("bad"), lambda seq: None)
    [path] = (tmp_path / "quarantine").glob("*/*.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "quarantine").stat().st_mode) == 0o700


def test_a_rejected_record_is_dead_lettered_for_that_handler_with_raw_bytes_and_reason(
    tmp_path: Path,
) -> None:
    consumer = make_consumer(tmp_path, Recorder("cleanup"), every=3)
    consumer.process(records("e1", "poison-1", "e3"), lambda seq: None)
    [letter] = list(DeadLetters(tmp_path / "dead"))
    assert (letter.raw, letter.handler, letter.reason) == (
        b"poison-1",
        "cleanup",
        "the record names no account",
    )
    assert (letter.stream_arn, letter.shard_id, letter.sequence_number) == (STREAM, "shardId-1", "101")
    assert consumer.stats.dead_lettered == 1


def test_a_rejected_record_never_parks_or_holds_back_the_others(tmp_path: Path) -> None:
    log: list[str] = []
    cleanup = Recorder("cleanup", log)
    consumer = make_consumer(tmp_path, cleanup, every=4)
    consumer.process(records("e1", "poison-1", "e3", "e4"), lambda seq: log.append(f"checkpoint:{seq}"))
    assert cleanup.flushed == ["e1", "e3", "e4"]
    assert ParkedWork(tmp_path / "parked").count() == 0
    assert log[-1] == "checkpoint:103"


def test_a_record_one_handler_rejects_still_reaches_the_other_handlers(tmp_path: Path) -> None:
    class Accepting(Recorder):
        def add(self, event: object) -> None:
            self.pending.append(event.event_id)  # type: ignore[attr-defined]

    lake = Accepting("lake")
    consumer = make_consumer(tmp_path, Recorder("cleanup"), lake, every=2)
    consumer.process(records("e1", "poison-1"), lambda seq: None)
    assert lake.flushed == ["e1", "poison-1"]
    assert [letter.handler for letter in DeadLetters(tmp_path / "dead")] == ["cleanup"]


def test_dead_letters_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    consumer = make_consumer(tmp_path, Recorder("cleanup"))
    consumer.process(records("poison"), lambda seq: None)
    [path] = (tmp_path / "dead").glob("*/*/*.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (path.parent, path.parent.parent, tmp_path / "dead"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


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


def test_a_parked_window_holds_neither_quarantined_nor_dead_lettered_records(tmp_path: Path) -> None:
    failing = Recorder("cleanup", failures=[TerminalError("queue down")])
    consumer = make_consumer(tmp_path, failing, every=4)
    consumer.process(records("e1", "bad", "poison", "e4"), lambda seq: None)
    [batch] = list(ParkedWork(tmp_path / "parked"))
    assert [r.data for r in batch.records] == [b"e1", b"e4"]


def test_a_failed_add_parks_that_handlers_whole_window_and_only_its_own(tmp_path: Path) -> None:
    log: list[str] = []
    failing = Recorder("lake", log, add_failures={"e2": OSError("disk full")})
    healthy = Recorder("journal", log)
    consumer = make_consumer(tmp_path, failing, healthy, every=3)
    consumer.process(records("e1", "e2", "e3"), lambda seq: log.append(f"checkpoint:{seq}"))
    [batch] = list(ParkedWork(tmp_path / "parked"))
    assert (batch.handler, [r.data for r in batch.records]) == ("lake", [b"e1", b"e2", b"e3"])
    assert batch.reason == "OSError"
    assert healthy.flushed == ["e1", "e2", "e3"]
    assert log[-1] == "checkpoint:102"


def test_a_retryable_flush_failure_that_says_park_now_is_parked_without_a_retry(tmp_path: Path) -> None:
    log: list[str] = []
    handler = Recorder("cleanup", log, failures=[RetryableError("queue did not answer", park_now=True)])
    consumer = make_consumer(tmp_path, handler)
    consumer.process(records("e1"), lambda seq: log.append("checkpoint"))
    assert log == ["flush:cleanup", "discard:cleanup", "checkpoint"]
    [batch] = list(ParkedWork(tmp_path / "parked"))
    assert (batch.handler, [r.data for r in batch.records]) == ("cleanup", [b"e1"])


def test_exhausted_retries_park_the_work(tmp_path: Path) -> None:
    handler = Recorder("a", failures=[RetryableError("x")] * 10)
    consumer = make_consumer(tmp_path, handler)
    consumer.process(records("e1"), lambda seq: None)
    assert ParkedWork(tmp_path / "parked").count() == 1
    assert consumer.stats.parked_batches == 1


def test_a_producer_flushes_before_the_sink_it_feeds_whatever_the_registration_order(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    lake = Recorder("lake", log)
    cleanup = Recorder("cleanup", log, sink=lake)
    consumer = make_consumer(tmp_path, lake, cleanup, every=1, feeds={"cleanup": ("lake",)})
    consumer.process(records("e1"), lambda seq: log.append(f"checkpoint:{seq}"))
    assert log == ["flush:cleanup", "flush:lake", "checkpoint:100"]
    assert "out:e1" in lake.flushed  # the producer's output was durable before the checkpoint


@pytest.mark.parametrize("lake_first", [True, False])
def test_outputs_are_durable_before_the_checkpoint_in_either_registration_order(
    tmp_path: Path, lake_first: bool
) -> None:
    log: list[str] = []
    lake = Recorder("lake", log)
    cleanup = Recorder("cleanup", log, sink=lake)
    order = (lake, cleanup) if lake_first else (cleanup, lake)
    consumer = make_consumer(tmp_path, *order, every=1, feeds={"cleanup": ("lake",)})
    durable_at_checkpoint: list[list[str]] = []
    consumer.process(records("e1"), lambda seq: durable_at_checkpoint.append(list(lake.flushed)))
    assert durable_at_checkpoint == [["e1", "out:e1"]]


def test_a_producer_whose_sink_cannot_flush_is_parked_too(tmp_path: Path) -> None:
    lake = Recorder("lake", failures=[TerminalError("disk full")])
    cleanup = Recorder("cleanup", sink=lake)
    consumer = make_consumer(tmp_path, cleanup, lake, every=1, feeds={"cleanup": ("lake",)})
    consumer.process(records("e1"), lambda seq: None)
    parked = {batch.handler: batch for batch in ParkedWork(tmp_path / "parked")}
    assert sorted(parked) == ["cleanup", "lake"]
    assert parked["cleanup"].reason == "sink lake failed: TerminalError"


def _parked_payloads(tmp_path: Path, handler: str) -> list[bytes]:
    return [
        r.data for batch in ParkedWork(tmp_path / "parked") if batch.handler == handler for r in batch.records
    ]


def test_a_flush_that_fails_after_finishing_part_of_the_window_parks_only_its_unfinished_records(
    tmp_path: Path,
) -> None:
    cleanup = PartlyFinishing("cleanup", [{"e1", "e3"}, set(), set()])
    consumer = make_consumer(tmp_path, cleanup, every=3)
    consumer.process(records("e1", "e2", "e3"), lambda seq: None)
    assert _parked_payloads(tmp_path, "cleanup") == [b"e2"]


def test_the_records_finished_by_any_attempt_of_a_commit_are_not_parked(tmp_path: Path) -> None:
    # The first attempt finishes e1; the last one fails with an error that names nothing.
    cleanup = PartlyFinishing("cleanup", [{"e1"}, {"e2"}, None])
    consumer = make_consumer(tmp_path, cleanup, every=3)
    consumer.process(records("e1", "e2", "e3"), lambda seq: None)
    assert _parked_payloads(tmp_path, "cleanup") == [b"e3"]


def test_a_flush_that_finished_every_record_before_failing_parks_nothing_and_checkpoints(
    tmp_path: Path,
) -> None:
    checkpoints: list[str | None] = []
    cleanup = PartlyFinishing("cleanup", [{"e1", "e2"}, set(), set()])
    consumer = make_consumer(tmp_path, cleanup, every=2)
    consumer.process(records("e1", "e2"), checkpoints.append)
    assert ParkedWork(tmp_path / "parked").count() == 0
    assert checkpoints == ["101"]


def test_a_producer_whose_sink_cannot_flush_parks_the_records_it_had_finished_too(tmp_path: Path) -> None:
    # Their outputs were in the sink's buffer, which is discarded: only a replay makes them again.
    lake = Recorder("lake", failures=[TerminalError("disk full")])
    cleanup = PartlyFinishing("cleanup", [{"e1"}, set(), set()], sink=lake)
    consumer = make_consumer(tmp_path, cleanup, lake, every=2, feeds={"cleanup": ("lake",)})
    consumer.process(records("e1", "e2"), lambda seq: None)
    assert _parked_payloads(tmp_path, "cleanup") == [b"e1", b"e2"]


def test_the_commit_reports_each_record_not_handled_by_store_and_code(tmp_path: Path) -> None:
    consumer = make_consumer(tmp_path, Recorder("cleanup", failures=[OSError()]), every=10)
    consumer.process(records("e1", "bad", "poison"), lambda seq: None)
    report = consumer.commit(lambda seq: None)
    assert report.records == 3
    assert report.codes() == {
        ("quarantine", "TerminalError"): 1,
        ("dead_letter", "RecordRejected"): 1,
        ("parked", "OSError"): 1,
    }


def test_a_registry_naming_an_unknown_sink_fails_when_the_consumer_is_built(tmp_path: Path) -> None:
    registry = HandlerRegistry()
    registry.register(Recorder("cleanup"), feeds=("lake",))
    stores = Stores.under(tmp_path)
    with pytest.raises(ValueError, match="not registered"):
        ShardConsumer(
            stream_arn=STREAM,
            handlers=registry,
            decode=fake_decode,
            quarantine=stores.quarantine,
            parked=stores.parked,
            dead_letters=stores.dead_letters,
        )


def test_lease_lost_never_checkpoints(tmp_path: Path) -> None:
    log: list[str] = []
    consumer = make_consumer(tmp_path, Recorder("a", log), every=10)
    consumer.process(records("e1"), lambda seq: log.append("checkpoint"))
    consumer.lease_lost()
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

    consumer = make_consumer(tmp_path, Recorder("a"))
    with pytest.raises(ConsumerCrash):
        consumer.process(records("e1"), refuse)


def refused_for_the_lease(seq: str | None) -> None:
    raise LeaseLost("checkpoint refused: the lease is held by another worker")


def test_a_checkpoint_refused_for_a_lost_lease_ends_the_shard_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pipeline.shard_consumer")
    consumer = make_consumer(tmp_path, Recorder("a"))
    consumer.process(records("e1"), refused_for_the_lease)
    [line] = [r for r in caplog.records if "lease lost" in r.getMessage()]
    assert (line.levelno, getattr(line, "shard", None)) == (logging.INFO, "shardId-1")


def test_after_a_lease_lost_at_checkpoint_the_shards_later_records_are_not_checkpointed(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    consumer = make_consumer(tmp_path, Recorder("a", log))
    consumer.process(records("e1"), refused_for_the_lease)
    consumer.process(records("e2"), lambda seq: log.append(f"checkpoint:{seq}"))
    consumer.shard_ended(lambda seq: log.append(f"checkpoint:{seq}"))
    assert log == ["flush:a"]  # the first window's flush; nothing after it is taken or checkpointed


def test_a_store_that_cannot_be_written_stops_the_consumer_before_any_checkpoint(tmp_path: Path) -> None:
    log: list[str] = []
    (tmp_path / "quarantine").write_text("a file where the folder should be")
    consumer = make_consumer(tmp_path, Recorder("a", log))
    with pytest.raises(OSError):
        consumer.process(records("bad"), lambda seq: log.append("checkpoint"))
    assert log == []


def test_stats_count_events_by_type(tmp_path: Path) -> None:
    consumer = make_consumer(tmp_path, Recorder("a"), every=2)
    consumer.process(records("e1", "e2"), lambda seq: None)
    assert consumer.stats.events_by_type == {EventType.UNKNOWN_ITEM.value: 2}
    assert (tmp_path / "stats" / "shardId-1.json").exists()

"""Recovery through the consumer's own path: replay of parked work, re-drive of the quarantine and of
the dead letters, and their export for inspection."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path
from typing import Any

import pytest

from pipeline.parking import RawRecord
from pipeline.recovery import Recovery, export_stored, reason_counts
from schema.errors import TerminalError
from tests.pipeline._consumer_fakes import (
    FAST_RETRY,
    STREAM,
    FakeEvent,
    PartlyFinishing,
    Recorder,
    Stores,
    fake_decode,
    records,
    registry_of,
)

FEEDS: dict[str, tuple[str, ...]] = {"cleanup": ("lake",)}


def recovery(tmp_path: Path, *handlers: Recorder, decode: Any = fake_decode) -> Recovery:
    stores = Stores.under(tmp_path)
    return Recovery(
        handlers=registry_of(*handlers, feeds=FEEDS),
        decode=decode,
        quarantine=stores.quarantine,
        parked=stores.parked,
        dead_letters=stores.dead_letters,
        retry=FAST_RETRY,
    )


def park(tmp_path: Path, handler: str, *payloads: str) -> Path:
    return Stores.under(tmp_path).parked.park(
        handler=handler, stream_arn=STREAM, shard_id="shardId-1", records=records(*payloads), reason="OSError"
    )


def fixed_decode(data: bytes, *, stream_arn: str, shard_id: str, sequence_number: str | None = None) -> Any:
    return FakeEvent(data.decode())


class Fixed(Recorder):
    """The handler after its fix: it accepts what it used to refuse."""

    def add(self, event: Any) -> None:
        self.pending.append(event.event_id)


def stored(tmp_path: Path) -> tuple[int, int, int]:
    stores = Stores.under(tmp_path)
    return stores.quarantine.count(), stores.dead_letters.count(), stores.parked.count()


# -- replay-parked -----------------------------------------------------------------------------------


def test_a_parked_batch_replays_to_its_handler_and_is_removed(tmp_path: Path) -> None:
    park(tmp_path, "cleanup", "e1", "e2")
    cleanup = Recorder("cleanup")
    report = recovery(tmp_path, cleanup, Recorder("lake")).replay_parked()
    assert cleanup.flushed == ["e1", "e2"]
    assert (report.finished, report.remaining) == (1, 0)
    assert stored(tmp_path) == (0, 0, 0)


def test_the_sinks_a_handler_feeds_are_flushed_before_its_batch_is_removed(tmp_path: Path) -> None:
    path = park(tmp_path, "cleanup", "e1")
    seen_at_lake_flush: list[bool] = []

    class Lake(Recorder):
        def flush(self) -> None:
            seen_at_lake_flush.append(path.exists())
            super().flush()

    lake = Lake("lake")
    recovery(tmp_path, Recorder("cleanup", sink=lake), lake).replay_parked()
    assert lake.flushed == ["out:e1"]
    assert seen_at_lake_flush == [True]
    assert not path.exists()


def test_the_sinks_are_given_no_event_of_the_replayed_batch(tmp_path: Path) -> None:
    park(tmp_path, "cleanup", "e1")
    lake, journal = Recorder("lake"), Recorder("journal")
    recovery(tmp_path, Recorder("cleanup", sink=lake), lake, journal).replay_parked()
    assert lake.flushed == ["out:e1"]
    assert journal.log == []


def test_an_undecodable_record_in_a_parked_batch_is_quarantined_once_and_the_rest_replay(
    tmp_path: Path,
) -> None:
    Stores.under(tmp_path).quarantine.put(
        raw=b"bad",
        reason="record is not JSON",
        stream_arn=STREAM,
        shard_id="shardId-1",
        sequence_number="101",
    )
    park(tmp_path, "lake", "e1", "bad", "e3")
    lake = Recorder("lake")
    report = recovery(tmp_path, Recorder("cleanup"), lake).replay_parked()
    assert lake.flushed == ["e1", "e3"]
    assert stored(tmp_path) == (1, 0, 0)
    assert report.failures == {("quarantine", "TerminalError"): 1}


def test_a_record_that_now_fails_terminally_is_dead_lettered_and_the_rest_replay(tmp_path: Path) -> None:
    park(tmp_path, "cleanup", "e1", "poison", "e3")
    cleanup = Recorder("cleanup")
    recovery(tmp_path, cleanup, Recorder("lake")).replay_parked()
    assert cleanup.flushed == ["e1", "e3"]
    [letter] = list(Stores.under(tmp_path).dead_letters)
    assert (letter.handler, letter.raw) == ("cleanup", b"poison")
    assert stored(tmp_path) == (0, 1, 0)


def test_a_damaged_parked_file_stays_and_every_other_batch_replays(tmp_path: Path) -> None:
    park(tmp_path, "lake", "e-1")
    damaged = tmp_path / "parked" / "lake" / "damaged.json"
    damaged.write_bytes(b"{truncated")
    lake = Recorder("lake")
    report = recovery(tmp_path, lake).replay_parked()
    assert (lake.flushed, report.finished, damaged.exists()) == (["e-1"], 1, True)


def test_a_batch_whose_handler_fails_again_stays_parked_as_it_was(tmp_path: Path) -> None:
    path = park(tmp_path, "lake", "e1", "e2")
    report = recovery(tmp_path, Recorder("lake", failures=[OSError("disk full")])).replay_parked()
    [batch] = list(Stores.under(tmp_path).parked)
    assert batch.path == path
    assert [r.data for r in batch.records] == [b"e1", b"e2"]
    assert (report.finished, report.remaining) == (0, 1)


def test_a_batch_that_fails_again_keeps_only_its_unfinished_records_parked(tmp_path: Path) -> None:
    park(tmp_path, "cleanup", "poison", "e2", "e3")
    report = recovery(tmp_path, Recorder("cleanup", failures=[OSError()]), Recorder("lake")).replay_parked()
    [batch] = list(Stores.under(tmp_path).parked)
    assert [r.data for r in batch.records] == [b"e2", b"e3"]
    assert stored(tmp_path) == (0, 1, 1)
    assert report.remaining == 1


def test_a_replay_that_finishes_part_of_a_batch_leaves_only_the_rest_parked(tmp_path: Path) -> None:
    park(tmp_path, "cleanup", "e1", "e2", "e3")
    cleanup = PartlyFinishing("cleanup", [{"e1", "e3"}, set(), set()])
    report = recovery(tmp_path, cleanup, Recorder("lake")).replay_parked()
    [batch] = list(Stores.under(tmp_path).parked)
    assert [r.data for r in batch.records] == [b"e2"]
    assert report.remaining == 1


def test_a_batch_whose_sink_fails_stays_parked_for_its_handler(tmp_path: Path) -> None:
    path = park(tmp_path, "cleanup", "e1")
    lake = Recorder("lake", failures=[OSError("disk full")])
    report = recovery(tmp_path, Recorder("cleanup", sink=lake), lake).replay_parked()
    assert path.exists()
    assert report.remaining == 1
    assert [batch.handler for batch in Stores.under(tmp_path).parked] == ["cleanup"]


def test_a_batch_of_a_handler_no_longer_registered_stays_parked(tmp_path: Path) -> None:
    park(tmp_path, "retired", "e1")
    report = recovery(tmp_path, Recorder("lake")).replay_parked()
    assert report.remaining == 1
    assert report.failures == {("parked", "UnknownHandler"): 1}


def test_replay_failures_are_logged_by_code_and_count_never_content(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    park(tmp_path, "cleanup", "e1-secret", "poison-secret", "bad-secret")
    caplog.set_level(logging.DEBUG, logger="pipeline")
    recovery(tmp_path, Recorder("cleanup"), Recorder("lake")).replay_parked()
    failures = {
        (r.store, r.error): r.records  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "recovery left records unhandled"
    }
    assert failures == {("dead_letter", "RecordRejected"): 1, ("quarantine", "TerminalError"): 1}
    assert all("secret" not in json.dumps(vars(r), default=str) for r in caplog.records)


# -- the quarantine ----------------------------------------------------------------------------------


def quarantine(tmp_path: Path, *payloads: str) -> None:
    store = Stores.under(tmp_path).quarantine
    for record in records(*payloads):
        store.put(
            raw=record.data,
            reason="not JSON",
            stream_arn=STREAM,
            shard_id="shardId-1",
            sequence_number=record.sequence_number,
        )


def test_quarantined_records_redriven_after_a_decoder_fix_reach_every_handler_and_are_removed(
    tmp_path: Path,
) -> None:
    quarantine(tmp_path, "bad-1", "bad-2")
    cleanup, lake = Recorder("cleanup"), Recorder("lake")
    report = recovery(tmp_path, cleanup, lake, decode=fixed_decode).redrive_quarantine()
    assert cleanup.flushed == ["bad-1", "bad-2"]
    assert lake.flushed == ["bad-1", "bad-2"]
    assert (report.finished, report.remaining) == (2, 0)
    assert stored(tmp_path) == (0, 0, 0)


def test_a_quarantined_record_that_still_cannot_be_decoded_stays(tmp_path: Path) -> None:
    quarantine(tmp_path, "bad-1", "fine")
    report = recovery(tmp_path, Recorder("lake")).redrive_quarantine()
    assert [record.raw for record in Stores.under(tmp_path).quarantine] == [b"bad-1"]
    assert (report.finished, report.remaining) == (1, 1)


def test_a_redriven_record_whose_handler_fails_moves_to_parked_work(tmp_path: Path) -> None:
    quarantine(tmp_path, "bad-1")
    recovery(tmp_path, Recorder("lake", failures=[OSError()]), decode=fixed_decode).redrive_quarantine()
    assert stored(tmp_path) == (0, 0, 1)


# -- the dead letters --------------------------------------------------------------------------------


def dead_letter(tmp_path: Path, handler: str, *payloads: str) -> None:
    store = Stores.under(tmp_path).dead_letters
    for record in records(*payloads):
        store.put(
            raw=record.data,
            reason="the record names no account",
            handler=handler,
            stream_arn=STREAM,
            shard_id="shardId-1",
            sequence_number=record.sequence_number,
        )


def test_dead_letters_redriven_after_a_fix_reach_their_handler_alone_and_are_removed(tmp_path: Path) -> None:
    dead_letter(tmp_path, "cleanup", "poison-1")
    lake = Recorder("lake")
    cleanup = Fixed("cleanup", sink=lake)
    report = recovery(tmp_path, cleanup, lake).redrive_dead_letters()
    assert cleanup.flushed == ["poison-1"]
    assert lake.flushed == ["out:poison-1"]  # its sink flushed, given no event of its own
    assert (report.finished, report.remaining) == (1, 0)
    assert stored(tmp_path) == (0, 0, 0)


def test_a_dead_letter_still_refused_stays(tmp_path: Path) -> None:
    dead_letter(tmp_path, "cleanup", "poison-1")
    report = recovery(tmp_path, Recorder("cleanup"), Recorder("lake")).redrive_dead_letters()
    assert (report.finished, report.remaining) == (0, 1)
    assert stored(tmp_path) == (0, 1, 0)


def test_a_redrive_for_one_handler_leaves_the_others_letters(tmp_path: Path) -> None:
    dead_letter(tmp_path, "cleanup", "poison-1")
    dead_letter(tmp_path, "journal", "poison-2")
    recovery(tmp_path, Fixed("cleanup"), Fixed("journal"), Recorder("lake")).redrive_dead_letters("cleanup")
    assert [letter.handler for letter in Stores.under(tmp_path).dead_letters] == ["journal"]


# -- listing and export ------------------------------------------------------------------------------


def test_stored_records_are_counted_by_handler_and_reason(tmp_path: Path) -> None:
    dead_letter(tmp_path, "cleanup", "poison-1", "poison-2")
    quarantine(tmp_path, "bad")
    stores = Stores.under(tmp_path)
    assert reason_counts(stores.dead_letters) == {("cleanup", "the record names no account"): 2}
    assert reason_counts(stores.quarantine) == {("", "not JSON"): 1}


def test_an_export_is_a_new_owner_only_file_of_the_stored_records(tmp_path: Path) -> None:
    dead_letter(tmp_path, "cleanup", "poison-1")
    destination = tmp_path / "export.jsonl"
    assert export_stored(Stores.under(tmp_path).dead_letters, destination) == 1
    assert stat.S_IMODE(destination.stat().st_mode) == 0o600
    [line] = [json.loads(line) for line in destination.read_text().splitlines()]
    assert (line["handler"], line["sequence_number"], line["raw_base64"]) == (
        "cleanup",
        "100",
        "cG9pc29uLTE=",
    )


def test_an_export_never_overwrites_a_file(tmp_path: Path) -> None:
    destination = tmp_path / "export.jsonl"
    destination.write_text("keep me")
    with pytest.raises(FileExistsError):
        export_stored([], destination)
    assert destination.read_text() == "keep me"


def test_a_recovery_over_a_registry_naming_an_unknown_sink_is_refused(tmp_path: Path) -> None:
    stores = Stores.under(tmp_path)
    with pytest.raises(ValueError):
        Recovery(
            handlers=registry_of(Recorder("cleanup"), feeds=FEEDS),
            decode=fake_decode,
            quarantine=stores.quarantine,
            parked=stores.parked,
            dead_letters=stores.dead_letters,
        )


def test_raw_records_round_trip_unchanged_through_a_replay(tmp_path: Path) -> None:
    Stores.under(tmp_path).parked.park(
        handler="lake",
        stream_arn=STREAM,
        shard_id="shardId-1",
        records=[RawRecord(b"e\xff", "7")],
        reason="r",
    )
    seen: list[bytes] = []

    def decode(data: bytes, **_: Any) -> Any:
        seen.append(data)
        raise TerminalError("not JSON")

    recovery(tmp_path, Recorder("lake"), decode=decode).replay_parked()
    assert seen == [b"e\xff"]
    assert [record.raw for record in Stores.under(tmp_path).quarantine] == [b"e\xff"]


def test_replay_progress_is_reported_before_each_batch_and_at_the_end(tmp_path: Path) -> None:
    park(tmp_path, "cleanup", "e1", "e2")
    seen: list[tuple[int, int]] = []
    recovery(tmp_path, Recorder("cleanup"), Recorder("lake")).replay_parked(
        progress=lambda done, total: seen.append((done, total))
    )
    assert seen == [(0, 1), (1, 1)]

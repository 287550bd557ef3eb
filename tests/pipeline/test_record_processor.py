"""The kclpy adapter: the protocol channel (stdout) carries protocol lines only, and an unexpected error
stops the child instead of letting kclpy swallow it."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from amazon_kclpy import kcl

from pipeline.dead_letter import DeadLetters
from pipeline.decode import decode_record
from pipeline.handlers import HandlerRegistry
from pipeline.journal import JournalHandler
from pipeline.parking import ParkedWork
from pipeline.quarantine import Quarantine
from pipeline.record_processor import EXIT_CODE_CRASH, KclRecordProcessor
from pipeline.shard_consumer import CommitPolicy, ShardConsumer
from tests.pipeline._consumer_fakes import STREAM
from tests.support.multilang import daemon_lines

RECORD = {
    "eventID": "e-1",
    "eventName": "INSERT",
    "eventVersion": "1.0",
    "eventSource": "aws:dynamodb",
    "awsRegion": "eu-west-1",
    "dynamodb": {
        "ApproximateCreationDateTime": 1796033513579,
        "Keys": {"pk": {"S": "USER#u1"}, "sk": {"S": "ENTITLEMENT#a1"}},
        "NewImage": {
            "pk": {"S": "USER#u1"},
            "sk": {"S": "ENTITLEMENT#a1"},
            "userId": {"S": "u1"},
            "arrayAccountId": {"S": "a1"},
            "status": {"S": "Active"},
        },
        "SequenceNumber": "100",
        "SizeBytes": 100,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    },
}


def answering_the_checkpoint_with(error: str, lines: str) -> str:
    """The daemon's lines, its answer to the child's checkpoint reporting `error` (a KCL exception name)."""
    messages = [json.loads(line) for line in lines.splitlines()]
    for message in messages:
        if message["action"] == "checkpoint":
            message["error"] = error
    return "".join(json.dumps(message) + "\n" for message in messages)


def run_child(
    tmp_path: Path,
    records: list[bytes],
    handlers: HandlerRegistry,
    checkpoint_error: str | None = None,
) -> list[dict[str, object]]:
    consumer = ShardConsumer(
        stream_arn=STREAM,
        handlers=handlers,
        decode=decode_record,
        quarantine=Quarantine(tmp_path / "q"),
        parked=ParkedWork(tmp_path / "p"),
        dead_letters=DeadLetters(tmp_path / "d"),
        commit=CommitPolicy(every_records=len(records), interval_seconds=3600),
    )
    lines = daemon_lines(records)
    if checkpoint_error is not None:
        lines = answering_the_checkpoint_with(checkpoint_error, lines)
    out = io.StringIO()
    process = kcl.KCLProcess(
        KclRecordProcessor(consumer),
        input_file=io.StringIO(lines),
        output_file=out,
        error_file=io.StringIO(),
    )
    process.run()
    # kclpy frames each protocol line with newlines; anything else on the channel would be a stray write.
    return [json.loads(line) for line in out.getvalue().splitlines() if line]


def test_the_protocol_channel_carries_protocol_lines_only_even_with_debug_logging(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    registry = HandlerRegistry()
    registry.register(JournalHandler(tmp_path / "journal.jsonl"))
    lines = run_child(tmp_path, [json.dumps(RECORD).encode(), b"not json"], registry)
    assert [line["action"] for line in lines] == ["status", "checkpoint", "status", "status"]
    assert lines[1]["sequenceNumber"] == "101"
    assert capsys.readouterr().out == ""


class Exploding:
    name = "exploding"

    def add(self, event: object) -> None:
        pass

    def flush(self) -> None:
        raise AssertionError("a bug, not a handler failure")

    def discard_pending(self) -> None:
        raise AssertionError("cannot even discard")


def test_an_unexpected_error_ends_the_child_without_a_checkpoint(tmp_path: Path) -> None:
    registry = HandlerRegistry()
    registry.register(Exploding())
    with pytest.raises(SystemExit) as stopped:
        run_child(tmp_path, [json.dumps(RECORD).encode()], registry)
    assert stopped.value.code == EXIT_CODE_CRASH


def test_a_checkpoint_refused_for_a_lost_lease_leaves_the_child_running(tmp_path: Path) -> None:
    registry = HandlerRegistry()
    registry.register(JournalHandler(tmp_path / "journal.jsonl"))
    lines = run_child(tmp_path, [json.dumps(RECORD).encode()], registry, "ShutdownException")
    # It answered the rest of the daemon's messages, and shut down without checkpointing again.
    assert [line["action"] for line in lines] == ["status", "checkpoint", "status", "status"]


def test_any_other_refused_checkpoint_ends_the_child(tmp_path: Path) -> None:
    registry = HandlerRegistry()
    registry.register(JournalHandler(tmp_path / "journal.jsonl"))
    with pytest.raises(SystemExit) as stopped:
        run_child(tmp_path, [json.dumps(RECORD).encode()], registry, "InvalidStateException")
    assert stopped.value.code == EXIT_CODE_CRASH

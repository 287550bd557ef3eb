"""A do-nothing KCL child for bench_child: the baseline the real child (`entitlements.child`) is set beside.

It speaks the same multilang protocol through the same kclpy, and checkpoints at the same cadence as the
real consumer (`pipeline.shard_consumer.ShardConsumer.process`: at the end of a `process_records` call,
once `commit_every_records` records are pending or `commit_interval_seconds` have passed since the last
commit, at the last record's exact sequence-number string), read from the same settings. By default it
never looks at a record's data: what it costs is the protocol alone.

Capture mode, `python -m bench._null_child --capture PATH` (used by `bench._capture`): the same child,
except that before each `process_records` call's checkpoint decision it appends every delivered record,
exactly as kclpy gives it (the sequence-number string and `Record.binary_data`, the base64-decoded
`data`), to the owner-only file PATH (`bench._capture_format` frames), and flushes. So every record at or
before a checkpoint is in the file.

Run by the launcher as `python -m bench._null_child`. Nothing here writes to stdout (the protocol channel).
"""

from __future__ import annotations

__all__ = ["CapturingRecordProcessor", "NullRecordProcessor", "main"]

import argparse
import os
import time
from typing import Any, BinaryIO

from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor

from bench._capture_format import frame
from config import load_settings


class NullRecordProcessor(processor.RecordProcessorBase):  # type: ignore[misc]
    def __init__(self, every_records: int, interval_seconds: float) -> None:
        self._every_records = every_records
        self._interval_seconds = interval_seconds
        self._pending = 0
        self._last_sequence: str | None = None
        self._last_commit_at = time.monotonic()

    def initialize(self, initialize_input: Any) -> None:
        self._last_commit_at = time.monotonic()

    def process_records(self, process_records_input: Any) -> None:
        records = process_records_input.records
        if records:
            self._pending += len(records)
            self._last_sequence = records[-1].sequence_number
        due_by_size = self._pending >= self._every_records
        due_by_time = time.monotonic() - self._last_commit_at >= self._interval_seconds
        if self._pending and (due_by_size or due_by_time):
            self._commit(process_records_input.checkpointer)

    def lease_lost(self, lease_lost_input: Any) -> None:
        self._pending = 0

    def shard_ended(self, shard_ended_input: Any) -> None:
        shard_ended_input.checkpointer.checkpoint()

    def shutdown_requested(self, shutdown_requested_input: Any) -> None:
        if self._pending:
            self._commit(shutdown_requested_input.checkpointer)

    def _commit(self, checkpointer: Any) -> None:
        checkpointer.checkpoint(self._last_sequence)
        self._pending = 0
        self._last_commit_at = time.monotonic()


class CapturingRecordProcessor(NullRecordProcessor):
    """The do-nothing child that also appends each delivered record to `capture` before it checkpoints."""

    def __init__(self, every_records: int, interval_seconds: float, capture: BinaryIO) -> None:
        super().__init__(every_records, interval_seconds)
        self._capture = capture

    def process_records(self, process_records_input: Any) -> None:
        records = process_records_input.records
        if records:
            self._capture.write(
                b"".join(frame(record.sequence_number, record.binary_data) for record in records)
            )
            self._capture.flush()
        super().process_records(process_records_input)


def _open_capture(path: str) -> BinaryIO:
    """The capture file, appended to (a restarted child adds to it), created owner-only."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench._null_child")
    parser.add_argument("--capture", metavar="PATH", help="append every delivered record to PATH")
    arguments = parser.parse_args()
    consumer = load_settings().consumer
    every, interval = consumer.commit_every_records, consumer.commit_interval_seconds
    if arguments.capture is None:
        kcl.KCLProcess(NullRecordProcessor(every, interval)).run()
        return
    with _open_capture(arguments.capture) as capture:
        kcl.KCLProcess(CapturingRecordProcessor(every, interval, capture)).run()


if __name__ == "__main__":
    main()

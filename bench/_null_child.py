"""A do-nothing KCL child for bench_child: the baseline the real child (`entitlements.child`) is set beside.

It speaks the same multilang protocol through the same kclpy, and checkpoints at the same cadence as the
real consumer (`pipeline.shard_consumer.ShardConsumer.process`: at the end of a `process_records` call,
once `commit_every_records` records are pending or `commit_interval_seconds` have passed since the last
commit, at the last record's exact sequence-number string), read from the same settings. It never looks
at a record's data: what it costs is the protocol alone.

Run by the launcher as `python -m bench._null_child`. Nothing here writes to stdout (the protocol channel).
"""

from __future__ import annotations

__all__ = ["NullRecordProcessor", "main"]

import time
from typing import Any

from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor

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


def main() -> None:
    consumer = load_settings().consumer
    kcl.KCLProcess(NullRecordProcessor(consumer.commit_every_records, consumer.commit_interval_seconds)).run()


if __name__ == "__main__":
    main()

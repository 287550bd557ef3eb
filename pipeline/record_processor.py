"""amazon-kclpy's v3 record processor interface, adapted onto `ShardConsumer`.

kclpy catches any exception a processor raises, prints it and reports the action done, after which a
later checkpoint would silently move past the failed records. So no exception may reach kclpy: an
unexpected one ends the child process (SystemExit), the daemon stops, and the supervisor restarts it
from the last checkpoint.

A checkpoint the daemon refuses because this worker no longer holds the lease (KCL's
`ShutdownException`: "instance doesn't hold the lease for this shard") is the one refusal that is not
a crash: it reaches the consumer as `LeaseLost`, which ends that shard's processing quietly. Any other
refusal (throttling, a dependency failure, `InvalidStateException`: no lease table, or kclpy's own
answer to a reply out of turn) still ends the child.
"""

from __future__ import annotations

__all__ = ["KclRecordProcessor"]

import logging
from typing import Any

from amazon_kclpy.checkpoint_error import CheckpointError
from amazon_kclpy.v3 import processor as kcl_processor

from pipeline.parking import RawRecord
from pipeline.shard_consumer import Checkpoint, LeaseLost, ShardConsumer

logger = logging.getLogger(__name__)

EXIT_CODE_CRASH = 70
# The names of the KCL exceptions (as the daemon reports them) that mean the lease is not ours any more.
LEASE_LOST_CHECKPOINT_ERRORS = frozenset({"ShutdownException"})


class KclRecordProcessor(kcl_processor.RecordProcessorBase):  # type: ignore[misc]
    def __init__(self, consumer: ShardConsumer) -> None:
        self._consumer = consumer

    def initialize(self, initialize_input: Any) -> None:
        self._guard(lambda: self._consumer.start(initialize_input.shard_id))

    def process_records(self, process_records_input: Any) -> None:
        def run() -> None:
            records = [
                # The sequence number stays the exact string the daemon gave: never an int.
                RawRecord(data=record.binary_data, sequence_number=record.sequence_number)
                for record in process_records_input.records
            ]
            self._consumer.process(
                records,
                _checkpoint(process_records_input.checkpointer),
                process_records_input.millis_behind_latest,
            )

        self._guard(run)

    def lease_lost(self, lease_lost_input: Any) -> None:
        self._guard(self._consumer.lease_lost)

    def shard_ended(self, shard_ended_input: Any) -> None:
        checkpoint = _checkpoint(shard_ended_input.checkpointer)
        self._guard(lambda: self._consumer.shard_ended(checkpoint))

    def shutdown_requested(self, shutdown_requested_input: Any) -> None:
        checkpoint = _checkpoint(shutdown_requested_input.checkpointer)
        self._guard(lambda: self._consumer.shutdown_requested(checkpoint))

    def _guard(self, action: Any) -> None:
        try:
            action()
        except Exception as error:
            # Error class and stream position only: the message of a third-party error may hold data.
            logger.critical(
                "record processor stopping without checkpoint",
                extra={"error": type(error).__name__, "shard": self._consumer.shard_id},
            )
            raise SystemExit(EXIT_CODE_CRASH) from None


def _checkpoint(checkpointer: Any) -> Checkpoint:
    """kclpy's checkpointer as the consumer's `Checkpoint`: a refusal for a lost lease becomes `LeaseLost`."""

    def checkpoint(sequence_number: str | None) -> None:
        try:
            checkpointer.checkpoint(sequence_number)
        except CheckpointError as error:
            if error.value in LEASE_LOST_CHECKPOINT_ERRORS:
                raise LeaseLost("checkpoint refused: the lease is held by another worker") from None
            raise

    return checkpoint

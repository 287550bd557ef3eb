"""The KCL child process: one per shard, started by the Java launcher, speaking the multilang protocol
on stdin/stdout. It builds the settings from its environment, registers the handlers and runs.

Nothing here may write to stdout: it is the protocol channel.
"""

from __future__ import annotations

__all__ = ["build_registry", "main"]

from amazon_kclpy import kcl

from analytics import LakeHandler, lake_from_settings
from config import Settings, load_settings
from entitlements._logging import configure_logging
from entitlements.commands.cleanup import build_cleanup_handler
from pipeline.dead_letter import DeadLetters
from pipeline.decode import decode_record
from pipeline.filtering import DroppingUsers
from pipeline.handlers import HandlerRegistry
from pipeline.journal import JournalHandler
from pipeline.parking import ParkedWork
from pipeline.quarantine import Quarantine
from pipeline.record_processor import KclRecordProcessor
from pipeline.shard_consumer import CommitPolicy, RetryPolicy, ShardConsumer
from processors.erasure import ErasureLedger, erased_filter


def build_registry(settings: Settings) -> HandlerRegistry:
    """The handlers, in flush order. The cleanup processor comes before the lake, so the outcomes it
    adds during its flush are made durable by the lake's flush, before the checkpoint."""
    registry = HandlerRegistry()
    if settings.consumer.event_journal is not None:
        registry.register(JournalHandler(settings.consumer.event_journal, settings.consumer.worker_id))
    # Events of an erased account that are still in the stream, or replayed, are dropped at landing.
    ledger = ErasureLedger.from_settings(settings)
    lake = DroppingUsers(LakeHandler(lake_from_settings(settings), settings.lake), erased_filter(ledger))
    registry.register(build_cleanup_handler(settings, sink=lake), feeds=(lake.name,))
    registry.register(lake)
    return registry


def build_consumer(settings: Settings) -> ShardConsumer:
    consumer = settings.consumer
    if consumer.stream_arn is None:
        raise SystemExit("ENTITLEMENTS_CONSUMER__STREAM_ARN must be set for the KCL child")
    return ShardConsumer(
        stream_arn=consumer.stream_arn,
        handlers=build_registry(settings),
        decode=decode_record,
        quarantine=Quarantine(consumer.quarantine_dir),
        parked=ParkedWork(consumer.parked_dir),
        dead_letters=DeadLetters(consumer.dead_letter_dir),
        stats_dir=consumer.state_dir / "stats",
        commit=CommitPolicy(consumer.commit_every_records, consumer.commit_interval_seconds),
        retry=RetryPolicy(consumer.handler_retry_attempts, consumer.handler_retry_max_seconds),
    )


def main() -> None:
    configure_logging()
    settings = load_settings()
    kcl.KCLProcess(KclRecordProcessor(build_consumer(settings))).run()


if __name__ == "__main__":
    main()

"""The stream side: a record decoded into a typed event, events handed to the registered handlers, the
shard checkpointed once they are durable.

The face is the names the rest of the project imports from `pipeline` (the composition root, the
commands, the lake's landing, the cleanup, the erasure, the bootstrap, the local stack, the benchmarks):
import them from here, not from the inner modules (tests/test_faces.py holds the face to them). The
names are loaded on first use, so importing one light name (`DecodeError`, `create_table`) does not load
the consumer.
"""

from __future__ import annotations

__all__ = [
    "SEQUENCE_WIDTH",
    "ChangeKind",
    "CleanupExpired",
    "CleanupScheduled",
    "CommitPolicy",
    "DaemonSpec",
    "DeadLetters",
    "DecodeError",
    "Decoder",
    "DroppingUsers",
    "EntitlementCreated",
    "EntitlementStatusChanged",
    "EntitlementUpdated",
    "HandlerRegistry",
    "HandlerRetryPolicy",
    "Handover",
    "ItemOrder",
    "JournalHandler",
    "KclDaemon",
    "KclRecordProcessor",
    "KinesisSource",
    "Lanes",
    "ParkedBatch",
    "ParkedWork",
    "Position",
    "Precision",
    "Quarantine",
    "RawRecord",
    "Recovery",
    "RecoveryReport",
    "ShardConsumer",
    "StreamEvent",
    "StreamPosition",
    "Ticket",
    "TicketState",
    "UnknownItemChanged",
    "create_table",
    "decode_export_item",
    "decode_record",
    "decode_stream_record",
    "enable_kinesis_destination",
    "export_stored",
    "is_sequence_number",
    "item_key",
    "kinesis_precision",
    "launcher_application_name",
    "launcher_properties",
    "reason_counts",
    "sortable_sequence",
    "stable_worker_id",
    "supervise",
    "watch_leases",
]

from typing import TYPE_CHECKING

from schema.faces import lazy_names

if TYPE_CHECKING:
    from pipeline._kinesis_envelope import Precision
    from pipeline.daemon import (
        DaemonSpec,
        KclDaemon,
        launcher_application_name,
        launcher_properties,
        stable_worker_id,
        supervise,
    )
    from pipeline.dead_letter import DeadLetters
    from pipeline.decode import KinesisSource, decode_export_item, decode_record, decode_stream_record
    from pipeline.errors import DecodeError
    from pipeline.events import (
        SEQUENCE_WIDTH,
        ChangeKind,
        CleanupExpired,
        CleanupScheduled,
        EntitlementCreated,
        EntitlementStatusChanged,
        EntitlementUpdated,
        StreamEvent,
        StreamPosition,
        UnknownItemChanged,
        is_sequence_number,
        sortable_sequence,
    )
    from pipeline.filtering import DroppingUsers
    from pipeline.handlers import HandlerRegistry
    from pipeline.handover import Handover
    from pipeline.item_order import ItemOrder
    from pipeline.journal import JournalHandler
    from pipeline.lanes import Lanes, Position, Ticket, TicketState, item_key
    from pipeline.lease_watch import watch_leases
    from pipeline.parking import ParkedBatch, ParkedWork, RawRecord
    from pipeline.quarantine import Quarantine
    from pipeline.record_processor import KclRecordProcessor
    from pipeline.recovery import Recovery, RecoveryReport, export_stored, reason_counts
    from pipeline.shard_consumer import CommitPolicy, Decoder, HandlerRetryPolicy, ShardConsumer
    from pipeline.tables import create_table, enable_kinesis_destination, kinesis_precision

_HOME = {
    "SEQUENCE_WIDTH": "pipeline.events",
    "ChangeKind": "pipeline.events",
    "CleanupExpired": "pipeline.events",
    "CleanupScheduled": "pipeline.events",
    "CommitPolicy": "pipeline.shard_consumer",
    "DaemonSpec": "pipeline.daemon",
    "DeadLetters": "pipeline.dead_letter",
    "DecodeError": "pipeline.errors",
    "Decoder": "pipeline.shard_consumer",
    "DroppingUsers": "pipeline.filtering",
    "EntitlementCreated": "pipeline.events",
    "EntitlementStatusChanged": "pipeline.events",
    "EntitlementUpdated": "pipeline.events",
    "HandlerRegistry": "pipeline.handlers",
    "HandlerRetryPolicy": "pipeline.shard_consumer",
    "Handover": "pipeline.handover",
    "ItemOrder": "pipeline.item_order",
    "JournalHandler": "pipeline.journal",
    "KclDaemon": "pipeline.daemon",
    "KclRecordProcessor": "pipeline.record_processor",
    "KinesisSource": "pipeline.decode",
    "Lanes": "pipeline.lanes",
    "ParkedBatch": "pipeline.parking",
    "ParkedWork": "pipeline.parking",
    "Position": "pipeline.lanes",
    "Precision": "pipeline._kinesis_envelope",
    "Quarantine": "pipeline.quarantine",
    "RawRecord": "pipeline.parking",
    "Recovery": "pipeline.recovery",
    "RecoveryReport": "pipeline.recovery",
    "ShardConsumer": "pipeline.shard_consumer",
    "StreamEvent": "pipeline.events",
    "StreamPosition": "pipeline.events",
    "Ticket": "pipeline.lanes",
    "TicketState": "pipeline.lanes",
    "UnknownItemChanged": "pipeline.events",
    "create_table": "pipeline.tables",
    "decode_export_item": "pipeline.decode",
    "decode_record": "pipeline.decode",
    "decode_stream_record": "pipeline.decode",
    "enable_kinesis_destination": "pipeline.tables",
    "export_stored": "pipeline.recovery",
    "is_sequence_number": "pipeline.events",
    "item_key": "pipeline.lanes",
    "kinesis_precision": "pipeline.tables",
    "launcher_application_name": "pipeline.daemon",
    "launcher_properties": "pipeline.daemon",
    "reason_counts": "pipeline.recovery",
    "sortable_sequence": "pipeline.events",
    "stable_worker_id": "pipeline.daemon",
    "supervise": "pipeline.daemon",
    "watch_leases": "pipeline.lease_watch",
}


__getattr__ = lazy_names(__name__, _HOME)

"""One unit of cleanup work: the account an expired cleanup record names, and the stream event it came
from. The same shape is the body of a parked message in the retry queue."""

from __future__ import annotations

__all__ = ["WORK_VERSION", "CleanupWork", "is_cleanup_expiry", "work_from_event"]

from pydantic import BaseModel, ConfigDict, Field

from pipeline.events import ChangeKind, CleanupExpired, StreamEvent
from schema.errors import RecordContext
from schema.table import CleanupRecord

WORK_VERSION = 1


class CleanupWork(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    version: int = WORK_VERSION
    user_id: str
    array_account_id: str = Field(min_length=1)
    cleanup_kind: str
    source_event_id: str
    source_stream_arn: str
    source_shard_id: str
    source_sequence_number: str
    # The attempt this work will be tried as: 0 on the stream, 1.. in the retry worker.
    attempt: int = Field(default=0, ge=0)
    # Why it was last parked (a short code), when it was.
    park_reason: str | None = None

    @property
    def context(self) -> RecordContext:
        return RecordContext(
            shard_id=self.source_shard_id,
            sequence_number=self.source_sequence_number,
            event_id=self.source_event_id,
        )


def is_cleanup_expiry(event: StreamEvent) -> bool:
    """True only for DynamoDB TTL's removal of a cleanup record: a REMOVE, with the TTL service identity,
    whose old image is a cleanup record. A service delete (reactivation), the REMOVE of an entitlement
    row, an INSERT or a MODIFY never qualifies."""
    return (
        isinstance(event, CleanupExpired)
        and event.change is ChangeKind.REMOVE
        and event.ttl_deletion is True
        and isinstance(event.old_item, CleanupRecord)
    )


def work_from_event(event: CleanupExpired) -> CleanupWork:
    """The work an expiry asks for: the account the *record* names (never the user's current one)."""
    record = event.old_item
    if not isinstance(record, CleanupRecord):
        raise ValueError("a cleanup expiry without its old image names no account")
    return CleanupWork(
        user_id=record.userId,
        array_account_id=record.arrayAccountId,
        cleanup_kind=record.cleanup_kind.value,
        source_event_id=event.event_id,
        source_stream_arn=event.position.stream_arn,
        source_shard_id=event.position.shard_id,
        source_sequence_number=event.position.sequence_number,
    )

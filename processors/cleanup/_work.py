"""One unit of cleanup work: the account an expired cleanup record names, and the stream event it came
from. The same shape is the body of a parked message in the retry queue.

`cleanup_work_for` is the handler's one rule for what an event asks of it: the work of a TTL removal of a
cleanup record; nothing for every other event; `RecordRejected` for a TTL removal of a cleanup record
whose own content names no account (no old image, an image that does not fit the record's shape, an empty
`arrayAccountId`): that record alone is dead-lettered, and the other expiries of its window carry on.
"""

from __future__ import annotations

__all__ = ["WORK_VERSION", "CleanupWork", "cleanup_work_for", "is_cleanup_expiry", "work_from_event"]

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline import ChangeKind, CleanupExpired, StreamEvent, UnknownItemChanged
from schema.errors import RecordContext, RecordRejected
from schema.table import CleanupRecord, ItemKind

WORK_VERSION = 1
_CLEANUP_ITEM_KINDS = frozenset({ItemKind.CANCELLATION, ItemKind.STALE})


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
    # A delete for this expiry was sent by an earlier attempt (its answer unknown, or not the last):
    # a 404 now is this processor's delete (see `processors.cleanup._notes`), on whichever host.
    delete_sent: bool = False
    # The expiry's final note, when an earlier attempt knew it (a `NoteState` value and its detail): work
    # parked after its delete was answered, only for its rows' mark (the flush's deadline came first). A
    # retry records the same outcome again and marks, and calls Array for nothing, on whichever host.
    final_state: str | None = None
    final_detail: str | None = None

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


def _context(event: StreamEvent) -> RecordContext:
    return RecordContext(
        shard_id=event.position.shard_id,
        sequence_number=event.position.sequence_number,
        event_id=event.event_id,
    )


def _is_unreadable_expiry(event: StreamEvent) -> bool:
    """A TTL removal under a cleanup record's key whose old image the decoder could not type as one
    (`arrayAccountId` missing or not a string, say)."""
    return (
        isinstance(event, UnknownItemChanged)
        and event.change is ChangeKind.REMOVE
        and event.ttl_deletion is True
        and event.item_kind in _CLEANUP_ITEM_KINDS
    )


def cleanup_work_for(event: StreamEvent) -> CleanupWork | None:
    """The work `event` asks for: a `CleanupWork` for a TTL removal of a cleanup record, None for any
    other event. Raises `RecordRejected` for an expiry whose own content names no account."""
    if is_cleanup_expiry(event) and isinstance(event, CleanupExpired):
        return work_from_event(event)
    if isinstance(event, CleanupExpired):
        raise RecordRejected(
            "a cleanup expiry without its old image names no Array account", context=_context(event)
        )
    if _is_unreadable_expiry(event):
        raise RecordRejected(
            "a TTL removal under a cleanup record's key whose image does not fit the record",
            context=_context(event),
        )
    return None


def work_from_event(event: CleanupExpired) -> CleanupWork:
    """The work an expiry asks for: the account the *record* names (never the user's current one).
    Raises `RecordRejected` when the record names no account."""
    record = event.old_item
    if not isinstance(record, CleanupRecord):
        raise RecordRejected(
            "a cleanup expiry without its old image names no Array account", context=_context(event)
        )
    if not record.arrayAccountId.strip():
        raise RecordRejected(
            "a cleanup expiry whose record has an empty or blank arrayAccountId", context=_context(event)
        )
    try:
        return CleanupWork(
            user_id=record.userId,
            array_account_id=record.arrayAccountId,
            cleanup_kind=record.cleanup_kind.value,
            source_event_id=event.event_id,
            source_stream_arn=event.position.stream_arn,
            source_shard_id=event.position.shard_id,
            source_sequence_number=event.position.sequence_number,
        )
    except ValidationError:
        raise RecordRejected(
            "a cleanup expiry that does not fit the cleanup work's shape", context=_context(event)
        ) from None

"""Kinesis Data Streams for DynamoDB: its envelope read into the DynamoDB stream record's raw shape, so
that `pipeline.decode` finishes it with the one set of rules both sources share.

A table streaming to Kinesis writes each change as ``awsRegion, eventID, eventName, userIdentity,
recordFormat, tableName, eventSource`` and ``dynamodb`` holding ``ApproximateCreationDateTime, Keys,
NewImage, OldImage, SizeBytes``: no ``SequenceNumber`` and no ``StreamViewType`` (the position is the
Kinesis record's sequence number) and no ``eventSourceARN``. That is how the two envelopes are told apart
(`is_kinesis_envelope`): a record naming ``recordFormat`` or ``tableName`` is Kinesis's; one that also
names a ``SequenceNumber`` or ``StreamViewType`` is neither and is refused.

``ApproximateCreationDateTime`` is an integer in the table's ``ApproximateCreationDateTimePrecision``,
milliseconds or microseconds, a setting the table's owner can change at any time. The unit is told by
magnitude, record by record (`precision_of`): epoch milliseconds stay below 10**14 until the year 5138 and
epoch microseconds are above it since 1973, so every record is read in its own unit whatever the setting
was when it was written. The time is normalised to microseconds (an aware datetime: both units are exact
there). A change of unit on a shard is said once per change by `KinesisSource` (a log line naming the
shard and the two units, and a count), since it is the table's setting changing under the consumer.

The event's position is (the Kinesis stream, the shard, `change_key`), not the Kinesis sequence number.
The lake orders an item's changes by their position's sequence key (`item_versions`, the current state,
the snapshot fold, every audit), and Kinesis's order is not the item's: a change may be put after its
item's next one, or twice. The change key is the creation time in microseconds (17 digits, zero-padded)
followed by 31 digits of a digest of the change itself (eventName, Keys, both images, userIdentity and
the time; not eventID, not SizeBytes): 48 digits, the width the lake's keys have. So

- an item's rows sort by when the change happened, whatever shard (a split or a merge moves an item's
  later changes to another shard) or Kinesis order they came in;
- a copy of a change has the copy's key on the same shard, so the lake's exactly-once landing drops a copy
  that arrives after a restart (when `pipeline.item_order` no longer remembers the first);
- every key is above every DynamoDB stream sequence number (21 to 40 digits), so in a switch-over an
  item's changes from Kinesis sort after those it had from the DynamoDB stream;
- it fits the one sequence-number rule, which a Kinesis sequence number (56 digits on AWS) does not.

The Kinesis sequence number stays the record's for everything that is the stream's bookkeeping (the
checkpoint, quarantine, parked work, dead letters: the raw record's). Two changes of one item in the
same microsecond tie on the time; `pipeline.item_order` hands them in order and gives them their keys
in that order.

Refused, with `DecodeError` (each reason names a field, never a value): a record of another table than
the configured one, a ``recordFormat`` other than ``application/json`` (or none), a time that is not a
non-negative integer or is out of range, a record that mixes both envelopes, and a Kinesis record decoded
without its sequence number or with one that is not decimal digits. The rest (eventID, eventName,
images, identity) is the shared decoder's.
"""

from __future__ import annotations

__all__ = [
    "KinesisSource",
    "Precision",
    "change_key",
    "is_kinesis_envelope",
    "is_kinesis_sequence",
    "precision_of",
    "read_kinesis_envelope",
]

import hashlib
import logging
import threading
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final

import orjson

from pipeline.errors import DecodeError

logger = logging.getLogger(__name__)

_RECORD_FORMAT: Final = "application/json"
# Epoch milliseconds are below this until the year 5138; epoch microseconds above it since 1973.
_MICROS_FROM: Final = 10**14
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_KINESIS_ONLY: Final = ("recordFormat", "tableName")
# Kinesis documents a sequence number as 0 or up to 129 digits (56 on AWS today).
_MAX_KINESIS_SEQUENCE: Final = 129
# The change key: 17 digits of microseconds (to the year 5138, as `_MICROS_FROM`), then 31 of the digest
# (about 103 bits: two changes collide only if also in the same microsecond): 48, the lake's key width.
_TIME_DIGITS: Final = 17
_MAX_MICROS: Final = 10**_TIME_DIGITS
_DIGEST_MODULUS: Final = 10**31
_STREAMS_ONLY: Final = ("SequenceNumber", "StreamViewType")


class Precision(StrEnum):
    """The unit of a Kinesis record's ApproximateCreationDateTime (the table's precision setting)."""

    MILLISECOND = "MILLISECOND"
    MICROSECOND = "MICROSECOND"


class KinesisSource:
    """What reading a Kinesis stream needs beyond the record: the configured table (a record of another
    table is refused) and, per shard, the unit the last record's time was in (a change is said).

    One per consumer process; the counts are for its stats and tests. Thread-safe: the unit memory is
    the only state."""

    def __init__(self, table_name: str) -> None:
        if not table_name:
            raise ValueError("a Kinesis source needs the table's name")
        self.table_name = table_name
        self.precision_changes = 0
        self._units: dict[str, Precision] = {}
        self._lock = threading.Lock()

    def note_precision(self, shard_id: str, precision: Precision) -> None:
        """Record the unit of a shard's record; a change from the shard's last one is logged and
        counted (counts and codes only: the shard is a position, not personal data)."""
        with self._lock:
            before = self._units.get(shard_id)
            if before is precision:
                return
            self._units[shard_id] = precision
            if before is None:
                return
            self.precision_changes += 1
        logger.warning(
            "ApproximateCreationDateTime precision changed mid-stream; each record is read in its own unit",
            extra={"shard": shard_id, "from_precision": before.value, "to_precision": precision.value},
        )


def is_kinesis_envelope(record: dict[str, Any]) -> bool:
    """Whether a parsed record is Kinesis's envelope (it names recordFormat or tableName)."""
    return any(field in record for field in _KINESIS_ONLY)


def precision_of(value: int) -> Precision:
    """The unit of a non-negative epoch integer, told by its magnitude (see the module)."""
    return Precision.MICROSECOND if value >= _MICROS_FROM else Precision.MILLISECOND


def _created_at(value: Any) -> tuple[datetime, Precision]:
    if type(value) is not int:  # bool is not int here; a float is not what Kinesis writes
        raise DecodeError("ApproximateCreationDateTime is missing or not an integer")
    if value < 0:
        raise DecodeError("ApproximateCreationDateTime is out of range")
    precision = precision_of(value)
    if value >= _MAX_MICROS:  # the year 5138 in microseconds: beyond the change key's time digits
        raise DecodeError("ApproximateCreationDateTime is out of range")
    try:
        if precision is Precision.MICROSECOND:
            return _EPOCH + timedelta(microseconds=value), precision
        return _EPOCH + timedelta(milliseconds=value), precision
    except OverflowError:
        raise DecodeError("ApproximateCreationDateTime is out of range") from None


def change_key(record: dict[str, Any], change: dict[str, Any], created_us: int) -> str:
    """The event's sequence number for a Kinesis record (see the module): its creation time in
    microseconds, then a digest of the change. Equal for two copies of one change, whatever their Kinesis
    sequence numbers; `created_us` comes first so that an item's keys sort in the order of its changes."""
    try:
        content = orjson.dumps(
            [
                record.get("eventName"),
                record.get("userIdentity"),
                created_us,
                change.get("Keys"),
                change.get("NewImage"),
                change.get("OldImage"),
            ],
            option=orjson.OPT_SORT_KEYS,
        )
    except orjson.JSONEncodeError:  # nested beyond what orjson writes: far beyond DynamoDB's 32 levels
        raise DecodeError("record nests too deeply") from None
    digest = int.from_bytes(hashlib.blake2b(content, digest_size=16).digest()) % _DIGEST_MODULUS
    return f"{created_us:0{_TIME_DIGITS}d}{digest:031d}"


def read_kinesis_envelope(
    record: dict[str, Any],
    *,
    source: KinesisSource | None,
    shard_id: str,
    sequence_number: str | None,
) -> dict[str, Any]:
    """The DynamoDB stream record (raw shape: an aware creation time) a Kinesis envelope stands for,
    its ``SequenceNumber`` the change's key (`change_key`). Its envelope fields are checked here; the
    rest is left to `pipeline.decode`. `source` None: this consumer was not configured for Kinesis."""
    if source is None:
        raise DecodeError("a Kinesis record, and the consumer is not configured for a Kinesis source")
    if sequence_number is None:
        raise DecodeError("a Kinesis record is decoded with the sequence number it was read at")
    if not is_kinesis_sequence(sequence_number):
        raise DecodeError(
            f"the Kinesis sequence number is not at most {_MAX_KINESIS_SEQUENCE} decimal digits"
        )
    change = record.get("dynamodb")
    if type(change) is not dict:
        raise DecodeError("dynamodb section is missing or not an object")
    if any(field in change for field in _STREAMS_ONLY):
        raise DecodeError("record mixes the DynamoDB stream's envelope and Kinesis's")
    record_format = record.get("recordFormat")
    if record_format != _RECORD_FORMAT:
        raise DecodeError(f"recordFormat is missing or not {_RECORD_FORMAT}")
    table = record.get("tableName")
    if type(table) is not str:
        raise DecodeError("tableName is missing or not a string")
    if table != source.table_name:
        raise DecodeError("tableName names another table than the configured one")
    created_at, precision = _created_at(change.get("ApproximateCreationDateTime"))
    source.note_precision(shard_id, precision)
    mapped = {name: value for name, value in record.items() if name not in _KINESIS_ONLY}
    mapped["dynamodb"] = {
        **change,
        "ApproximateCreationDateTime": created_at,
        "SequenceNumber": change_key(record, change, _micros(created_at)),
    }
    return mapped


def is_kinesis_sequence(value: object) -> bool:
    """A Kinesis sequence number as the API documents it: 1 to 129 ASCII decimal digits."""
    return (
        type(value) is str and 0 < len(value) <= _MAX_KINESIS_SEQUENCE and value.isascii() and value.isdigit()
    )


def _micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds

"""Where an export sits among the stream's changes, and whether the stream reaches back to it.

The lake orders an item's changes by sequence key (`analytics.lake._fold.STATE_ORDER`). An exported
item is the item's state at the export's time T, so its row must sort after every stream change of that
item before T and before every change at or after T. Stream changes no closer to T than the stream
time's precision (`time_precision_seconds`: ApproximateCreationDateTime is rounded down to the second)
count as before T; the rest go to the stream, whose latest change then wins.

So each exported item gets a sequence number of its own (`ExportOrder.sequence_for`):
- an item with stream changes before T: its last such change's sequence number plus one. Above that
  change, and at most equal to the item's next change (sequence numbers only grow, and are unique to a
  change): a tie on the key goes to the stream row (its ARN sorts after an export's), so the change
  after T wins either way. Two items cannot get the same number (their changes differ);
- an item with none: a number below every stream sequence number (DynamoDB's have 21 to 40 digits:
  at least 10**20), unique to its (data file, line), so it sorts before all of the item's changes.

Reading the stream from its trim horizon up to T is what this costs: one pass over the records older
than T (at most the stream's 24 hours), keys only kept.

The stream covers changes from `covered_from`: its creation (DescribeStream's CreationRequestDateTime)
or, on a stream older than its retention, now minus the retention. If that is later than T minus the
margin, changes in between may be in neither the export nor the stream (`StreamGap`).
"""

from __future__ import annotations

__all__ = ["SMALL_LIMIT", "ExportOrder", "StreamReader", "read_export_order", "stream_covered_from"]

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from analytics.bootstrap._errors import BootstrapRefused
from pipeline import is_sequence_number
from schema.aws_errors import converted

SMALL_LIMIT = 10**20
_LINE_SPACE = 10**12


class StreamReader(Protocol):
    def describe_stream(self, **kwargs: Any) -> dict[str, Any]: ...
    def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]: ...
    def get_records(self, **kwargs: Any) -> dict[str, Any]: ...


def _key_of(keys: Any) -> tuple[str, str] | None:
    if not isinstance(keys, dict):
        return None
    pk, sk = keys.get("pk"), keys.get("sk")
    if not isinstance(pk, dict) or not isinstance(sk, dict):
        return None
    pk_value, sk_value = pk.get("S"), sk.get("S")
    if type(pk_value) is not str or type(sk_value) is not str:
        return None
    return pk_value, sk_value


@dataclass
class ExportOrder:
    """Each item's last stream sequence number before T (keys held in memory only, never logged)."""

    last_before: dict[tuple[str, str], int] = field(default_factory=dict)
    records_read: int = 0

    def sequence_for(self, key: tuple[str, str], file_index: int, line: int) -> str:
        """The exported item's sequence number (see the module's rule)."""
        last = self.last_before.get(key)
        if last is not None:
            return str(last + 1)
        small = file_index * _LINE_SPACE + line + 1
        if small >= SMALL_LIMIT:
            raise BootstrapRefused("the export has more data files or lines than the ordering can number")
        return str(small)


def _moment(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), UTC)
    return None


def _shards(streams: StreamReader, stream_arn: str) -> tuple[list[dict[str, Any]], datetime | None]:
    shards: list[dict[str, Any]] = []
    created: datetime | None = None
    start: str | None = None
    while True:
        arguments: dict[str, Any] = {"StreamArn": stream_arn}
        if start is not None:
            arguments["ExclusiveStartShardId"] = start
        with converted("DynamoDB Streams DescribeStream"):
            described = streams.describe_stream(**arguments)["StreamDescription"]
        created = created or _moment(described.get("CreationRequestDateTime"))
        shards.extend(described.get("Shards", []))
        start = described.get("LastEvaluatedShardId")
        if not start:
            return shards, created


def read_export_order(
    streams: StreamReader, stream_arn: str, *, exported_at: datetime, precision: timedelta
) -> tuple[ExportOrder, datetime | None]:
    """Each item's last stream change before `exported_at - precision`, and the stream's creation time."""
    order = ExportOrder()
    before = exported_at - precision
    shards, created = _shards(streams, stream_arn)
    for shard in shards:
        with converted("DynamoDB Streams GetShardIterator"):
            iterator = streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            ).get("ShardIterator")
        while iterator:
            with converted("DynamoDB Streams GetRecords"):
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records = page.get("Records", [])
            passed = False
            for record in records:
                order.records_read += 1
                ddb = record.get("dynamodb") or {}
                sequence = ddb.get("SequenceNumber")
                if not is_sequence_number(sequence):
                    raise BootstrapRefused("a stream record has no sequence number of the documented form")
                number = int(str(sequence))
                if number < SMALL_LIMIT:
                    raise BootstrapRefused(
                        "the stream's sequence numbers are shorter than DynamoDB's 21 digits: the export "
                        "cannot be ordered among them"
                    )
                moment = _moment(ddb.get("ApproximateCreationDateTime"))
                if moment is None:
                    raise BootstrapRefused("a stream record has no creation time")
                if moment >= before:
                    passed = True
                    break
                key = _key_of(ddb.get("Keys"))
                if key is not None:
                    order.last_before[key] = number
            # An open shard's end answers no records: it holds nothing older than T beyond this point.
            if passed or not records:
                break
            iterator = page.get("NextShardIterator")
    return order, created


def stream_covered_from(created: datetime | None, *, now: datetime, retention: timedelta) -> datetime:
    """The earliest instant from which the stream holds every change."""
    horizon = now - retention
    if created is None:
        return horizon
    return max(created, horizon)

"""Kinesis Data Streams for DynamoDB, on the local stack: each change of the table, forwarded to a Kinesis
stream of N shards in the envelope AWS writes there.

moto serves Kinesis (several shards, put_records, get_records, split and merge) but not DynamoDB's
streaming-destination calls (EnableKinesisStreamingDestination and the rest), so the stack does what
DynamoDB would: it tails the table's DynamoDB stream (every shard, from the trim horizon) and puts each
change on the Kinesis stream, partition key the item's key, so one item's changes land on one shard.

The envelope is Kinesis's, not the DynamoDB stream's: `awsRegion`, `eventID`, `eventName`, `userIdentity`
(the TTL service's identity on a TTL delete, else null), `recordFormat` (`application/json`), `tableName`,
`eventSource` (`aws:dynamodb`) and `dynamodb` with `ApproximateCreationDateTime` (an integer, in
milliseconds or microseconds as the table's precision setting says), `Keys`, `NewImage`, `OldImage` and
`SizeBytes`; no `SequenceNumber`, no `StreamViewType` (the position is the Kinesis sequence number).

Kinesis delivers at least once and, across a table's partitions, out of order; consumers must settle that
per item key. The forwarder injects both at set rates (seeded, so a run can be repeated): `duplicate_rate`
puts a change twice (the copy a few changes later), `reorder_rate` swaps a change with its item's next
change (when one follows closely): on the item's shard the later change comes first.
"""

from __future__ import annotations

__all__ = ["Faults", "KinesisForwarder", "Precision", "create_kinesis_stream", "kinesis_envelope"]

import contextlib
import json
import logging
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# The consumer's unit of ApproximateCreationDateTime, the one class for the table's precision setting;
# still exported here, where the forwarder's callers take the envelope's unit with its function.
from pipeline import Precision

_log = logging.getLogger(__name__)

_PUT_BATCH = 500  # PutRecords' largest batch
_PAGE = 1000  # GetRecords' largest page on the DynamoDB stream
_DUPLICATE_LAG = 3  # a duplicate goes out this many changes after its original (or at the batch's end)
_REORDER_WINDOW = 16  # a reordered change swaps with its item's next change among the next this many


@dataclass(frozen=True, slots=True)
class Faults:
    """What Kinesis may do to a table's changes, injected at these rates (0 to 1) with this seed."""

    duplicate_rate: float = 0.0
    reorder_rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("duplicate_rate", "reorder_rate"):
            rate = getattr(self, name)
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")


def create_kinesis_stream(kinesis: Any, name: str, shards: int) -> str:
    """Create the stream (N shards) unless it exists, wait until it is active; its ARN."""
    with contextlib.suppress(kinesis.exceptions.ResourceInUseException):  # it exists: use it
        kinesis.create_stream(StreamName=name, ShardCount=shards)
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 50})
    return str(kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"])


def _epoch_units(moment: Any, precision: Precision) -> int:
    seconds = moment.timestamp() if isinstance(moment, datetime) else float(moment)
    scale = 1_000 if precision is Precision.MILLISECOND else 1_000_000
    return round(seconds * scale)


def kinesis_envelope(record: dict[str, Any], *, table_name: str, precision: Precision) -> dict[str, Any]:
    """The Kinesis envelope of one DynamoDB stream record (as boto3 returns it)."""
    stream = record["dynamodb"]
    body: dict[str, Any] = {
        "ApproximateCreationDateTime": _epoch_units(stream["ApproximateCreationDateTime"], precision),
        "Keys": stream["Keys"],
    }
    for image in ("NewImage", "OldImage"):
        if image in stream:
            body[image] = stream[image]
    body["SizeBytes"] = int(stream.get("SizeBytes", 0))
    return {
        "awsRegion": record.get("awsRegion"),
        "eventID": record["eventID"],
        "eventName": record["eventName"],
        "userIdentity": record.get("userIdentity"),
        "recordFormat": "application/json",
        "tableName": table_name,
        "dynamodb": body,
        "eventSource": "aws:dynamodb",
    }


def partition_key(keys: dict[str, Any]) -> str:
    """The item's key as Kinesis's partition key: one item's changes go to one shard."""
    return "|".join(f"{name}={next(iter(value.values()))}" for name, value in sorted(keys.items()))


class KinesisForwarder:
    """Tails the table's DynamoDB stream and puts each change on the Kinesis stream (see the module).

    `forward_available()` forwards what the DynamoDB stream holds now (tests call it directly);
    `start()` does so every `interval_seconds` on a thread until `stop()`.
    """

    def __init__(
        self,
        *,
        streams: Any,
        kinesis: Any,
        stream_arn: str,
        kinesis_stream_name: str,
        table_name: str,
        precision: Precision = Precision.MICROSECOND,
        faults: Faults = Faults(),
        interval_seconds: float = 0.2,
    ) -> None:
        self._streams = streams
        self._kinesis = kinesis
        self._stream_arn = stream_arn
        self._target = kinesis_stream_name
        self._table_name = table_name
        self._precision = precision
        self._faults = faults
        # One generator a fault: the reorder draws depend on how the changes fell into batches (timing),
        # so on a shared generator they moved every later duplicate; apart, the duplicates of a seed
        # are the same changes in every run (the n-th change forwarded is or is not doubled).
        self._duplicates = random.Random(f"{faults.seed}-duplicates")  # noqa: S311 (fault injection)
        self._reorders = random.Random(f"{faults.seed}-reorders")  # noqa: S311 (fault injection)
        self._interval = interval_seconds
        self._iterators: dict[str, str | None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.forwarded = 0  # changes read from the DynamoDB stream and put
        self.duplicated = 0
        self.reordered = 0

    def set_precision(self, precision: Precision) -> None:
        """The table's precision setting changed (it can at any time): later changes use it."""
        with self._lock:
            self._precision = precision

    def _new_records(self) -> Iterator[dict[str, Any]]:
        shards = self._streams.describe_stream(StreamArn=self._stream_arn)["StreamDescription"]["Shards"]
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._streams.get_shard_iterator(
                    StreamArn=self._stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            while (iterator := self._iterators[shard_id]) is not None:
                page = self._streams.get_records(ShardIterator=iterator, Limit=_PAGE)
                self._iterators[shard_id] = page.get("NextShardIterator")
                if not page["Records"]:
                    break
                yield from page["Records"]

    def _with_faults(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        late: list[tuple[int, dict[str, Any]]] = []  # (position to go out at, copy)
        for entry in entries:
            out.append(entry)
            if self._faults.duplicate_rate and self._duplicates.random() < self._faults.duplicate_rate:
                late.append((len(out) + _DUPLICATE_LAG, entry))
                self.duplicated += 1
            while late and late[0][0] <= len(out):
                out.append(late.pop(0)[1])
        out.extend(copy for _, copy in late)
        if self._faults.reorder_rate:
            swapped: set[int] = set()
            for index, entry in enumerate(out):
                if index in swapped or self._reorders.random() >= self._faults.reorder_rate:
                    continue
                later = next(
                    (
                        other
                        for other in range(index + 1, min(len(out), index + 1 + _REORDER_WINDOW))
                        if other not in swapped and out[other]["PartitionKey"] == entry["PartitionKey"]
                    ),
                    None,
                )
                if later is not None:  # the item's next change goes out first
                    out[index], out[later] = out[later], entry
                    swapped |= {index, later}
                    self.reordered += 1
        return out

    def forward_available(self) -> int:
        """Forward every change the DynamoDB stream holds that was not forwarded yet; how many."""
        with self._lock:
            entries = [
                {
                    "Data": json.dumps(
                        kinesis_envelope(record, table_name=self._table_name, precision=self._precision),
                        default=str,
                    ).encode(),
                    "PartitionKey": partition_key(record["dynamodb"]["Keys"]),
                }
                for record in self._new_records()
            ]
            self._put(self._with_faults(entries))
            self.forwarded += len(entries)
            return len(entries)

    def _put(self, entries: list[dict[str, Any]]) -> None:
        for start in range(0, len(entries), _PUT_BATCH):
            pending = entries[start : start + _PUT_BATCH]
            while pending:  # a throttled entry is put again; moto never throttles, AWS may
                answer = self._kinesis.put_records(StreamName=self._target, Records=pending)
                pending = [
                    entry
                    for entry, result in zip(pending, answer["Records"], strict=True)
                    if "ErrorCode" in result
                ]

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="kinesis-forwarder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.forward_available()
            except Exception as failed:  # the stack is stopping, or moto hiccupped: try again next time
                _log.warning("kinesis forwarding failed", extra={"code": type(failed).__name__})

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

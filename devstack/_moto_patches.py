"""Adjustments to moto's in-process DynamoDB that the local stack needs, and the version they rely on.

moto[server]==5.2.5 (pinned in pyproject.toml) rolls back a refused TransactWriteItems by deep-copying
every table the transaction names *before* it runs (items, stream records and all) and, on refusal,
putting the copies in place of the live tables. Two consequences break a stream consumer:

- the live `StreamShard` is replaced, so every shard iterator handed out before (the KCL consumer's)
  keeps reading the orphaned shard: it sees the refused transaction's writes as phantom records and
  never sees another record; the next write also reuses the phantom's sequence number;
- each transaction copies the whole table and its stream, so writes slow down as the table grows
  (quadratic over a run), and moto's model instance tracking keeps every copy alive.

`install_transaction_rollback()` replaces that mechanism: the table copy is skipped (moto's
`copy.deepcopy` of a `Table` inside `transact_write_items` returns the table itself), and the wrapper
snapshots only the items the transaction names, then on any failure puts those items back and truncates
the *same* live shard to its length before the call. Refused transactions leave no trace, iterators keep
working, and a transaction costs what it touches.

What this relies on (checked by `check_moto_supported`): `moto.dynamodb.models` imports the `copy`
module as `copy` and calls `copy.deepcopy(self.tables[name])` for its backup in
`DynamoDBBackend.transact_write_items(self, transact_items)`; `DynamoDBBackend.tables`,
`get_table`, `get_keys_value`; `Table.items` (hash -> range -> Item, or hash -> Item), `Table.get_item`,
`Table.has_range_key`, `Table.hash_key_attr`, `Table.range_key_attr`, `Table.stream_shard.items`.
The MotoServer's DynamoDB lock serialises requests, so no reader sees a write before it is rolled back.

`install_stream_fidelity()`: moto appends a stream record for every put and update, also one that leaves
the item exactly as it was; DynamoDB does not ("If you perform a PutItem or UpdateItem operation that
does not change any data in an item, DynamoDB Streams does not write a stream record for that
operation", Amazon DynamoDB Developer Guide, "Change data capture for DynamoDB Streams"). The patch wraps
`StreamShard.add(self, old, new)` (moto calls it from `Table.put_item` and `DynamoDBBackend.update_item`,
also inside transactions) and drops the record when both images are present and equal, attribute by
attribute with DynamoDB's value semantics (numbers by value, sets unordered). See docs/local-stack.md.

`install_ttl_index()`: the TTL emulator (`devstack.ttl_emulator`) must not scan a whole table under the
DynamoDB lock on every pass. Each table gets an index of candidates, integral epoch seconds -> keys,
built by one scan the first time a pass needs it (`ttl_index(table, attribute_name)`) and kept up to
date by wrapping `Table.put_item` (puts, batch writes, transaction puts, updates that create an item)
and `DynamoDBBackend.update_item` (updates, transaction updates): after each, the stored item's TTL
attribute, when it is a Number holding integral seconds, is added. Nothing is removed on a delete or a
change: the index is a superset, and the pass checks each due key against the live item (a key gone or
moved to a later TTL is dropped, the later value having been added by its own write). A transaction
rolled back in place restores items whose earlier TTL was indexed when they were written. A pass then
costs what is due, not the size of the table. Relies on `Table.put_item(self, item_attrs, ...)`,
`DynamoDBBackend.update_item(...) -> Item`, `Item.hash_key`, `Item.range_key`, `Item.attrs`.

`install_stream_identity_hook()` wraps `StreamShard.add(self, old, new)`: while `as_ttl_service()` is
active (the emulator's deletions), the REMOVE records appended get `record["userIdentity"]` set to the
TTL service identity, which moto's GetRecords returns.

`install_sqs_send_cost()`: moto's `SQSBackend.send_message` reads `queue.attributes` for every message it
sends, and that property counts the queue's messages (visible, delayed, in flight: three passes over
every message held), so a SendMessageBatch of ten into a queue holding n messages costs 30 n, where SQS
costs the same whatever the depth. On a retry queue that fills faster than its worker drains (the
cleanup fault test), parking slowed from 0.03 s to 0.6 s a batch of ten as the queue grew to 500. The
patch serves the send path (`send_message`, `send_message_batch`, inside them only) the one attribute
it reads, `ContentBasedDeduplication` (a FIFO queue's), without the counts; GetQueueAttributes and every
other reader still get them all. Relies on `moto.sqs.models.Queue.attributes` being a property and on
`Queue.fifo_queue`, `Queue.content_based_deduplication`, `SQSBackend.send_message` and
`SQSBackend.send_message_batch`.

`install_sqs_receive_cost()`: moto's `SQSBackend.receive_message` checks each message it returns against
the queue's retention period through `get_queue_attributes`, which builds `queue.attributes` (the three
passes over every message held) for each message, so a receive of ten from a queue holding n messages
costs 30 n. A relinker draining 192 jobs at concurrency 16 spent most of moto's time there (py-spy):
receives took ~250 ms instead of ~10, and the DynamoDB calls queued behind them. The patch reads the
queue's `message_retention_period` alone, with the same rule (a message is kept while its sent time plus
the period is later than now). Relies on `SQSBackend.is_message_valid_based_on_retention_period(self,
queue_name, message)`, `SQSBackend.get_queue`, `Queue.message_retention_period` and
`Message.sent_timestamp` (milliseconds).

`install_query_cost()`: moto's `Table.query` on the table itself (no index) builds its candidates from
`Table.all_items()`, every item of the table sorted, then keeps the partition's: a Query costs the whole
table (a sort of n items with Python comparisons), where DynamoDB reads the one partition. The relinker's
Query took most of moto's DynamoDB time at 200 users (py-spy) and every route's read slows as the table
grows. Inside a table Query (and only there, per thread) `all_items` answers the named partition's items
alone, sorted as moto sorts them, so the filters, order, paging and limits that follow are moto's own.
An index Query is untouched. Relies on `Table.query(self, hash_key, ..., index_name, ...)` filtering
`self.all_items()` by `item.hash_key == hash_key` when `index_name` is None, on `Table.items` (hash ->
range -> Item, or hash -> Item) and `Table.all_items`'s sort key.

`install_page_cap()`: moto's GetRecords returns `Limit` records (1,000 by default) whatever their size;
DynamoDB Streams stops a page at 1 MB ("GetRecords ... can retrieve up to 1 MB of data or 1000 stream
records, whichever comes first", DynamoDB Streams API reference). Pages of the bench's 1.16 KB records
were 1.16 MB, about 140 records more than AWS would give. The patch wraps `StreamShard.get(self, start,
quantity)` (moto's `ShardIterator.get` calls it, and nothing else does) and keeps the longest prefix of
the records it returns whose `SizeBytes` sum to at most `PAGE_LIMIT_BYTES` (always at least one record,
as AWS returns a record larger than the rest of a page). `ShardIterator.get` then starts the next
iterator after the last record kept, so nothing is skipped. `SizeBytes` is moto's own figure for each
record (the length of its `dynamodb` part as JSON, "a substantial overestimate" of AWS's by moto's own
comment), so a page is cut no later than AWS would cut it. Nothing else on the read path (GetRecords,
GetShardIterator, DescribeStream, ListStreams) is patched: `tests/devstack/test_moto_patches_page_cap.py`
checks that every function on it is moto's own after every install. Relies on `StreamShard.get(self,
start, quantity)` returning the records' dicts with `dynamodb.SizeBytes`.

`install_kinesis_resharding()`: moto's Kinesis SplitShard empties the parent and puts its records again
by their keys, which its routing sends back into the parent (it takes the first shard whose hash range
holds the key, closed or not), and so does every later put: the children never receive a record. Its
MergeShards copies both parents' records into the child (each a second copy on another shard) and later
puts again go to the closed parents. And a closed shard never ends: its GetRecords always hands a next
iterator, so a KCL reader never reaches SHARD_END and never starts the children. Kinesis does none of
this ("the parent shard ... records that were put before the split stay in it ... after the reshard,
records are written to the child shards"; GetRecords "NextShardIterator: if set to null, the shard has
been closed and the requested iterator does not return any more data", Kinesis Data Streams developer
guide and API reference). The patch keeps the parents' records out of sight during moto's own split and
merge (moto moves nothing; the parents keep their records and close), routes a put to the open shard
whose range holds its hash key (inclusive, as Kinesis's ranges are), and answers a read of a closed
shard that returns no record at or past its last record with no next iterator and with its children
(`ChildShards`: id, parents, hash range, as Kinesis answers; KCL 3 refuses a shard end without them and
retries the read for ever: "GetRecords response is not valid"). Relies on
`moto.kinesis.models.Stream.split_shard(self, shard_to_split, new_starting_hash_key)`,
`Stream.merge_shards(self, shard_to_merge, adjacent_shard_to_merge)`, `Stream.get_shard_for_key(self,
partition_key, explicit_hash_key)` (the md5 of the partition key, or the explicit hash key),
`Stream.shards`, `Stream.get_shard`, `Shard.records`, `is_open`, `starting_hash`, `ending_hash`,
`get_max_sequence_number`, and `KinesisBackend.get_records(self, stream_arn, shard_iterator, limit)`
returning (next iterator, records, millis behind) with the iterator's last sequence number in it
(`moto.kinesis.utils.decompose_shard_iterator`), `KinesisResponse.get_records(self)` returning an
`ActionResult` whose `result` is the answer's dict, `Shard.parent`, `Shard.adjacent_parent`. moto's
merge checks adjacency only with the lower shard named first. Tested in
`tests/devstack/test_moto_patches_kinesis_resharding.py`.
"""

from __future__ import annotations

__all__ = [
    "PAGE_LIMIT_BYTES",
    "SUPPORTED_MOTO_VERSION",
    "TTL_IDENTITY",
    "TtlIndex",
    "UnsupportedMotoVersion",
    "as_ttl_service",
    "check_moto_supported",
    "install_kinesis_resharding",
    "install_page_cap",
    "install_query_cost",
    "install_sqs_receive_cost",
    "install_sqs_send_cost",
    "install_stream_fidelity",
    "install_stream_identity_hook",
    "install_transaction_rollback",
    "install_ttl_index",
    "integral_seconds",
    "item_unchanged",
    "page_within_cap",
    "ttl_index",
]

import contextlib
import copy
import functools
import hashlib
import heapq
import importlib.metadata
import inspect
import threading
from collections import OrderedDict
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from types import ModuleType
from typing import Any

import moto.dynamodb.models as dynamodb_models
from moto.core.utils import unix_time
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import StreamShard, Table
from moto.kinesis.models import KinesisBackend
from moto.kinesis.models import Shard as KinesisShard
from moto.kinesis.models import Stream as KinesisStream
from moto.kinesis.responses import KinesisResponse
from moto.kinesis.utils import decompose_shard_iterator
from moto.sqs.models import Queue, SQSBackend

from schema.errors import TerminalError

SUPPORTED_MOTO_VERSION = "5.2.5"

_MARKER = "_entitlements_transaction_rollback"
_install_lock = threading.Lock()
_in_transaction = threading.local()


class UnsupportedMotoVersion(TerminalError):
    """The installed moto is not the version whose internals the local stack was written against."""


def check_moto_supported() -> None:
    """Refuse to patch a moto whose internals may differ from the ones relied on."""
    installed = importlib.metadata.version("moto")
    if installed != SUPPORTED_MOTO_VERSION:
        raise UnsupportedMotoVersion(
            f"the local stack supports moto {SUPPORTED_MOTO_VERSION} only, found {installed}"
        )
    checks = (
        list(inspect.signature(StreamShard.add).parameters) == ["self", "old", "new"],
        list(inspect.signature(Table.put_item).parameters)[:2] == ["self", "item_attrs"],
        list(inspect.signature(DynamoDBBackend.update_item).parameters)[:2] == ["self", "table_name"],
        list(inspect.signature(DynamoDBBackend.transact_write_items).parameters)
        == ["self", "transact_items"],
        isinstance(getattr(dynamodb_models, "copy", None), ModuleType | _CopyShim),
    )
    if not all(checks):
        raise UnsupportedMotoVersion("moto's DynamoDB internals differ from the ones relied on")


class _CopyShim:
    """Stands in for the `copy` module inside moto.dynamodb.models: inside a transaction, a Table's
    "backup" is the table itself (the wrapper below rolls back what the transaction touched)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        if isinstance(value, Table) and getattr(_in_transaction, "active", False):
            return value
        return copy.deepcopy(value, memo)


_Snapshot = tuple[Table, DynamoType, DynamoType | None, Item | None]

_FIDELITY_MARKER = "_entitlements_stream_fidelity"


def _same_value(left: Any, right: Any) -> bool:
    """Two low-level attribute values ({"S": ...}, {"N": ...}, ...) hold the same data."""
    if not (isinstance(left, dict) and isinstance(right, dict) and len(left) == len(right) == 1):
        return bool(left == right)
    (left_type, left_value), (right_type, right_value) = next(iter(left.items())), next(iter(right.items()))
    if left_type != right_type:
        return False
    if left_type == "N":
        return Decimal(left_value) == Decimal(right_value)
    if left_type == "NS":
        return {Decimal(v) for v in left_value} == {Decimal(v) for v in right_value}
    if left_type in ("SS", "BS"):
        return set(left_value) == set(right_value)
    if left_type == "L":
        return len(left_value) == len(right_value) and all(
            _same_value(a, b) for a, b in zip(left_value, right_value, strict=True)
        )
    if left_type == "M":
        return left_value.keys() == right_value.keys() and all(
            _same_value(left_value[k], right_value[k]) for k in left_value
        )
    return bool(left_value == right_value)


def item_unchanged(old: Item | None, new: Item | None) -> bool:
    """A write from `old` to `new` changed no data: both exist and hold the same attributes and values."""
    if old is None or new is None:
        return False
    before, after = old.to_json()["Attributes"], new.to_json()["Attributes"]
    return before.keys() == after.keys() and all(_same_value(before[k], after[k]) for k in before)


def install_stream_fidelity() -> None:
    """Make moto write no stream record for a put or update that changes nothing, as DynamoDB does (see
    the module docstring). Idempotent; process-wide."""
    check_moto_supported()
    with _install_lock:
        original = StreamShard.add
        if getattr(original, _FIDELITY_MARKER, False):
            return

        @functools.wraps(original)
        def add(self: StreamShard, old: Item | None, new: Item | None) -> None:
            if item_unchanged(old, new):
                return
            original(self, old, new)

        setattr(add, _FIDELITY_MARKER, True)
        StreamShard.add = add  # type: ignore[method-assign]


def _snapshot(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> list[_Snapshot]:
    """The current state of every item the transaction names (malformed entries are moto's to refuse)."""
    snapshots: list[_Snapshot] = []
    for entry in transact_items:
        if not isinstance(entry, dict) or len(entry) != 1:
            continue
        op_type, op = next(iter(entry.items()))
        if not isinstance(op, dict):
            continue
        try:
            table = backend.get_table(op["TableName"])
            if op_type == "Put":
                attrs = op["Item"]
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            hash_key, range_key = backend.get_keys_value(table, key)
            current = table.get_item(hash_key, range_key)
        except Exception:  # noqa: S112  (an entry moto itself will refuse; nothing to snapshot)
            continue
        snapshots.append((table, hash_key, range_key, copy.deepcopy(current)))
    return snapshots


def _restore(snapshots: list[_Snapshot]) -> None:
    """Put every snapshotted item back as it was, without writing stream records."""
    for table, hash_key, range_key, prior in reversed(snapshots):
        # moto types `items` loosely: hash -> range -> Item, or hash -> Item without a range key.
        items: dict[Any, Any] = table.items
        if table.has_range_key:
            by_range: dict[Any, Any] = items[hash_key]
            if prior is None:
                by_range.pop(range_key, None)
            else:
                by_range[range_key] = prior
        elif prior is None:
            items.pop(hash_key, None)
        else:
            items[hash_key] = prior


def install_transaction_rollback() -> None:
    """Make moto's TransactWriteItems roll back in place (see the module docstring). Idempotent."""
    check_moto_supported()
    with _install_lock:
        original = DynamoDBBackend.transact_write_items
        if getattr(original, _MARKER, False):
            return

        @functools.wraps(original)
        def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
            snapshots = _snapshot(self, transact_items)
            shards = {
                id(table.stream_shard): (table.stream_shard, len(table.stream_shard.items))
                for table, *_ in snapshots
                if table.stream_shard is not None
            }
            _in_transaction.active = True
            try:
                original(self, transact_items)
            except BaseException:
                _restore(snapshots)
                for shard, length in shards.values():
                    del shard.items[length:]
                raise
            finally:
                _in_transaction.active = False

        setattr(transact_write_items, _MARKER, True)
        setattr(dynamodb_models, "copy", _CopyShim())  # noqa: B010  (a module attribute, typed as a module)
        DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


# ---- TTL: the deletions' service identity, and the index of candidates -------------------------------

TTL_IDENTITY: dict[str, str] = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
_IDENTITY_MARKER = "_entitlements_ttl_identity_hook"
_INDEX_MARKER = "_entitlements_ttl_index"
_INDEX_ATTRIBUTE = "_entitlements_ttl_index"
_deleting = threading.local()

_Key = tuple[DynamoType, DynamoType | None]


def install_stream_identity_hook() -> None:
    """Wrap `StreamShard.add` so the records appended under `as_ttl_service()` carry the TTL identity.
    Idempotent; inert for every other write."""
    check_moto_supported()
    with _install_lock:
        original = StreamShard.add
        if getattr(original, _IDENTITY_MARKER, False):
            return

        @functools.wraps(original)
        def add(self: StreamShard, old: Item | None, new: Item | None) -> None:
            before = len(self.items)
            original(self, old, new)
            if new is None and getattr(_deleting, "active", False):
                for record in self.items[before:]:
                    record.record["userIdentity"] = dict(TTL_IDENTITY)

        setattr(add, _IDENTITY_MARKER, True)
        StreamShard.add = add  # type: ignore[method-assign]


@contextlib.contextmanager
def as_ttl_service() -> Iterator[None]:
    """Deletions made inside are TTL's: their stream records carry the service identity."""
    _deleting.active = True
    try:
        yield
    finally:
        _deleting.active = False


def integral_seconds(value: DynamoType | None) -> int | None:
    """The integral epoch seconds a TTL attribute holds, or None when DynamoDB's TTL would never act on
    it (not a Number, not integral, not a number at all)."""
    if value is None or value.type != "N" or not isinstance(value.value, str):
        return None
    try:
        number = Decimal(value.value)
    except InvalidOperation:
        return None
    if not number.is_finite() or number != number.to_integral_value():
        return None
    return int(number)


class TtlIndex:
    """A table's TTL candidates: epoch seconds -> keys, a superset of the items that may expire."""

    def __init__(self, attribute_name: str) -> None:
        self.attribute_name = attribute_name
        self._buckets: dict[int, set[_Key]] = {}
        self._due: list[int] = []  # a heap of the buckets' seconds

    def __len__(self) -> int:
        return sum(len(keys) for keys in self._buckets.values())

    def add(self, item: Item) -> None:
        seconds = integral_seconds(item.attrs.get(self.attribute_name))
        if seconds is None:
            return
        bucket = self._buckets.get(seconds)
        if bucket is None:
            bucket = self._buckets[seconds] = set()
            heapq.heappush(self._due, seconds)
        bucket.add((item.hash_key, item.range_key))

    def pop_due(self, now_epoch_seconds: int) -> list[_Key]:
        """Every key indexed under a time strictly before now, removed from the index."""
        keys: list[_Key] = []
        while self._due and self._due[0] < now_epoch_seconds:
            keys.extend(self._buckets.pop(heapq.heappop(self._due)))
        return keys


def _table_items(table: Table) -> list[Item]:
    # moto types `items` loosely: hash key -> range key -> Item, or hash key -> Item without a range key.
    values: list[Any] = list(table.items.values())
    if table.has_range_key:
        return [item for by_range in values for item in by_range.values()]
    return values


def ttl_index(table: Table, attribute_name: str) -> TtlIndex:
    """The table's index for `attribute_name`, built by one scan when it has none (or one for another
    attribute name); kept up to date by the write hooks from then on (`install_ttl_index`)."""
    index: TtlIndex | None = getattr(table, _INDEX_ATTRIBUTE, None)
    if index is None or index.attribute_name != attribute_name:
        index = TtlIndex(attribute_name)
        for item in _table_items(table):
            index.add(item)
        setattr(table, _INDEX_ATTRIBUTE, index)
    return index


def _index_stored(table: Table, item: Item) -> None:
    index: TtlIndex | None = getattr(table, _INDEX_ATTRIBUTE, None)
    if index is not None:  # else no pass has needed it yet: its first build will read the item
        index.add(item)


def install_ttl_index() -> None:
    """Keep each table's TTL index (once built) up to date on every put and update. Idempotent."""
    check_moto_supported()
    with _install_lock:
        original_put = Table.put_item
        if getattr(original_put, _INDEX_MARKER, False):
            return
        original_update = DynamoDBBackend.update_item

        @functools.wraps(original_put)
        def put_item(self: Table, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Item:
            item = original_put(self, item_attrs, *args, **kwargs)
            _index_stored(self, item)
            return item

        @functools.wraps(original_update)
        def update_item(self: DynamoDBBackend, table_name: str, *args: Any, **kwargs: Any) -> Item:
            item = original_update(self, table_name, *args, **kwargs)
            _index_stored(self.get_table(table_name), item)
            return item

        setattr(put_item, _INDEX_MARKER, True)
        Table.put_item = put_item  # type: ignore[method-assign]
        DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]


# ---- SQS: a send costs what it sends, not the depth of the queue -------------------------------------

_SQS_SEND_MARKER = "_entitlements_sqs_send_cost"
_sending = threading.local()


def _send_path_attributes(queue: Queue) -> dict[str, Any]:
    """What moto's send path reads of `Queue.attributes` (only `ContentBasedDeduplication`, and only on
    a FIFO queue), built without the message counts."""
    if not queue.fifo_queue:
        return {}
    value = getattr(queue, "content_based_deduplication", "false")  # set from the attributes, untyped
    return {"ContentBasedDeduplication": str(value).lower() if isinstance(value, bool) else value}


def install_sqs_send_cost() -> None:
    """Make moto's SendMessage/SendMessageBatch cost what they send, as in SQS (see the module
    docstring). Idempotent; process-wide."""
    check_moto_supported()
    with _install_lock:
        attributes = Queue.__dict__.get("attributes")
        if not isinstance(attributes, property) or attributes.fget is None:
            raise UnsupportedMotoVersion("moto's SQS Queue.attributes is not the property relied on")
        if getattr(attributes.fget, _SQS_SEND_MARKER, False):
            return
        full = attributes.fget

        def queue_attributes(self: Queue) -> dict[str, Any]:
            if getattr(_sending, "active", False):
                return _send_path_attributes(self)
            answer: dict[str, Any] = full(self)
            return answer

        def sending(original: Any) -> Any:
            @functools.wraps(original)
            def send(self: Any, *args: Any, **kwargs: Any) -> Any:
                outer = getattr(_sending, "active", False)
                _sending.active = True
                try:
                    return original(self, *args, **kwargs)
                finally:
                    _sending.active = outer

            return send

        setattr(queue_attributes, _SQS_SEND_MARKER, True)
        Queue.attributes = property(queue_attributes)  # type: ignore[method-assign,assignment]
        SQSBackend.send_message = sending(SQSBackend.send_message)  # type: ignore[method-assign]
        SQSBackend.send_message_batch = sending(SQSBackend.send_message_batch)  # type: ignore[method-assign]


# ---- SQS: a receive costs what it returns, not the depth of the queue --------------------------------

_SQS_RECEIVE_MARKER = "_entitlements_sqs_receive_cost"


def install_sqs_receive_cost() -> None:
    """Make moto's ReceiveMessage cost what it returns, as in SQS (see the module docstring).
    Idempotent; process-wide."""
    check_moto_supported()
    with _install_lock:
        current = SQSBackend.is_message_valid_based_on_retention_period
        if getattr(current, _SQS_RECEIVE_MARKER, False):
            return

        def retained(self: SQSBackend, queue_name: str, message: Any) -> bool:
            # As moto's check, reading the one attribute it needs instead of all of them.
            queue = self.get_queue(queue_name)
            period = int(getattr(queue, "message_retention_period"))  # noqa: B009 (set from the attributes, untyped)
            return bool(period + message.sent_timestamp / 1000 > unix_time())

        setattr(retained, _SQS_RECEIVE_MARKER, True)
        SQSBackend.is_message_valid_based_on_retention_period = retained  # type: ignore[method-assign]


# ---- DynamoDB: a Query of a table's partition costs the partition, not the table ---------------------

_QUERY_MARKER = "_entitlements_query_cost"
_querying = threading.local()


def _partition_items(table: Table, hash_key: DynamoType) -> list[Item]:
    """What moto's `Table.all_items` answers, for the one partition `hash_key` (same order)."""
    partition = table.items.get(hash_key)
    if partition is None:
        return []
    if not table.range_key_attr:
        return [partition] if isinstance(partition, Item) else []
    return sorted(partition.values(), key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key)


def install_query_cost() -> None:
    """Make moto's Query on a table (not an index) read the one partition it names, as DynamoDB does
    (see the module docstring). Idempotent; process-wide."""
    check_moto_supported()
    with _install_lock:
        if getattr(Table.query, _QUERY_MARKER, False):
            return
        original_query = Table.query
        original_all_items = Table.all_items
        signature = inspect.signature(original_query)

        @functools.wraps(original_query)
        def query(self: Table, *args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(self, *args, **kwargs).arguments
            hash_key = bound.get("hash_key")
            if bound.get("index_name") is not None or hash_key is None:
                return original_query(self, *args, **kwargs)
            outer = getattr(_querying, "key", None)
            _querying.key = (self, hash_key)
            try:
                return original_query(self, *args, **kwargs)
            finally:
                _querying.key = outer

        @functools.wraps(original_all_items)
        def all_items(self: Table) -> list[Item]:
            current = getattr(_querying, "key", None)
            if current is not None and current[0] is self:
                return _partition_items(self, current[1])
            answer: list[Item] = original_all_items(self)
            return answer

        setattr(query, _QUERY_MARKER, True)
        Table.query = query  # type: ignore[method-assign]
        Table.all_items = all_items  # type: ignore[method-assign]


# ---- DynamoDB Streams: a GetRecords page holds at most 1 MB, as in AWS -------------------------------

PAGE_LIMIT_BYTES = 1_048_576  # DynamoDB Streams' 1 MB a GetRecords call
_PAGE_MARKER = "_entitlements_page_cap"


def page_within_cap(
    records: list[dict[str, Any]], limit_bytes: int = PAGE_LIMIT_BYTES
) -> list[dict[str, Any]]:
    """The longest prefix of `records` whose `dynamodb.SizeBytes` sum to at most `limit_bytes`, and never
    fewer than one record (a record alone larger than the cap is still returned, as AWS does)."""
    total = 0
    for count, record in enumerate(records):
        total += int(record["dynamodb"]["SizeBytes"])
        if total > limit_bytes:
            return records[: max(count, 1)]
    return records


def install_page_cap() -> None:
    """Make moto's GetRecords stop a page at 1 MB, as DynamoDB Streams does (see the module docstring).
    Idempotent; process-wide."""
    check_moto_supported()
    with _install_lock:
        original = StreamShard.get
        if getattr(original, _PAGE_MARKER, False):
            return
        if list(inspect.signature(original).parameters) != ["self", "start", "quantity"]:
            raise UnsupportedMotoVersion("moto's StreamShard.get is not the one relied on")

        @functools.wraps(original)
        def get(self: StreamShard, start: int, quantity: int) -> list[dict[str, Any]]:
            return page_within_cap(original(self, start, quantity))

        setattr(get, _PAGE_MARKER, True)
        StreamShard.get = get  # type: ignore[method-assign]


_RESHARD_MARKER = "_entitlements_kinesis_resharding"


def _hash_of(partition_key: str, explicit_hash_key: str | None) -> int:
    """The 128-bit hash key Kinesis routes a record by, as moto computes it."""
    if explicit_hash_key:
        return int(explicit_hash_key)
    return int(hashlib.md5(partition_key.encode("utf-8")).hexdigest(), 16)  # noqa: S324 (Kinesis's rule)


def install_kinesis_resharding() -> None:
    """Make moto's Kinesis SplitShard and MergeShards behave as Kinesis does (see the module docstring).
    Idempotent; process-wide."""
    check_moto_supported()
    with _install_lock:
        if getattr(KinesisStream.split_shard, _RESHARD_MARKER, False):
            return
        expected: dict[Any, list[str]] = {
            KinesisStream.split_shard: ["self", "shard_to_split", "new_starting_hash_key"],
            KinesisStream.merge_shards: ["self", "shard_to_merge", "adjacent_shard_to_merge"],
            KinesisStream.get_shard_for_key: ["self", "partition_key", "explicit_hash_key"],
            KinesisBackend.get_records: ["self", "stream_arn", "shard_iterator", "limit"],
            KinesisResponse.get_records: ["self"],
        }
        for function, parameters in expected.items():
            if list(inspect.signature(function).parameters) != parameters:
                raise UnsupportedMotoVersion(f"moto's {function.__qualname__} is not the one relied on")
        split, merge = KinesisStream.split_shard, KinesisStream.merge_shards
        route, read = KinesisStream.get_shard_for_key, KinesisBackend.get_records
        answer_read = KinesisResponse.get_records

        @contextlib.contextmanager
        def records_kept(stream: KinesisStream, *shard_ids: str) -> Iterator[None]:
            # moto's split re-puts the parent's records and its merge copies both parents' into the
            # child: with the parents' records out of sight for the call, it moves nothing.
            parents = [stream.shards[shard_id] for shard_id in shard_ids if shard_id in stream.shards]
            kept = [parent.records for parent in parents]
            for parent in parents:
                parent.records = OrderedDict()
            try:
                yield
            finally:
                for parent, records in zip(parents, kept, strict=True):
                    parent.records = records

        @functools.wraps(split)
        def split_shard(self: KinesisStream, shard_to_split: str, new_starting_hash_key: str) -> None:
            with records_kept(self, shard_to_split):
                split(self, shard_to_split, new_starting_hash_key)

        @functools.wraps(merge)
        def merge_shards(self: KinesisStream, shard_to_merge: str, adjacent_shard_to_merge: str) -> None:
            with records_kept(self, shard_to_merge, adjacent_shard_to_merge):
                merge(self, shard_to_merge, adjacent_shard_to_merge)

        @functools.wraps(route)
        def get_shard_for_key(
            self: KinesisStream, partition_key: str, explicit_hash_key: str
        ) -> KinesisShard | None:
            found = route(self, partition_key, explicit_hash_key)  # moto's checks of the key
            if found is None or found.is_open:
                return found
            # moto took the first shard whose range holds the key, a closed parent included.
            key = _hash_of(partition_key, explicit_hash_key)
            return next(
                (
                    shard
                    for shard in self.shards.values()
                    if shard.is_open and shard.starting_hash <= key <= shard.ending_hash
                ),
                None,
            )

        @functools.wraps(read)
        def get_records(
            self: KinesisBackend, stream_arn: str | None, shard_iterator: str, limit: int | None
        ) -> tuple[str | None, list[Any], int]:
            next_iterator, records, behind = read(self, stream_arn, shard_iterator, limit)
            stream_name, shard_id, last = decompose_shard_iterator(next_iterator)
            stream = self.describe_stream(stream_arn=stream_arn, stream_name=stream_name)
            shard = stream.get_shard(shard_id)
            # A closed shard read to its end has no next iterator: how a reader learns it ended.
            if not records and not shard.is_open and int(last) >= shard.get_max_sequence_number():
                return None, records, behind
            return next_iterator, records, behind

        @functools.wraps(answer_read)
        def answer_get_records(self: KinesisResponse) -> Any:
            answer = answer_read(self)
            body = answer.result
            # At a shard's end Kinesis names its children (KCL refuses an end without them).
            if isinstance(body, dict) and body.get("NextShardIterator") is None:
                stream_name, shard_id, _ = decompose_shard_iterator(self._get_param("ShardIterator"))
                stream = self.kinesis_backend.describe_stream(
                    stream_arn=self._get_param("StreamARN"), stream_name=stream_name
                )
                body["ChildShards"] = [
                    {
                        "ShardId": child.shard_id,
                        "ParentShards": [p for p in (child.parent, child.adjacent_parent) if p],
                        "HashKeyRange": {
                            "StartingHashKey": str(child.starting_hash),
                            "EndingHashKey": str(child.ending_hash),
                        },
                    }
                    for child in stream.shards.values()
                    if shard_id in (child.parent, child.adjacent_parent)
                ]
            return answer

        wrappers: tuple[Any, ...] = (
            split_shard,
            merge_shards,
            get_shard_for_key,
            get_records,
            answer_get_records,
        )
        for function in wrappers:
            setattr(function, _RESHARD_MARKER, True)
        KinesisStream.split_shard = split_shard  # type: ignore[method-assign]
        KinesisStream.merge_shards = merge_shards  # type: ignore[method-assign]
        KinesisStream.get_shard_for_key = get_shard_for_key  # type: ignore[method-assign]
        KinesisBackend.get_records = get_records  # type: ignore[method-assign, assignment]
        KinesisResponse.get_records = answer_get_records  # type: ignore[method-assign]

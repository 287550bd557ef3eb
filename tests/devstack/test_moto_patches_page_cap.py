"""The local stack's GetRecords page cap (devstack._moto_patches.install_page_cap): a page stops at 1 MB
of records, as DynamoDB Streams stops it, nothing is skipped across pages, and no other function on
moto's stream read path is replaced by any of the local stack's patches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import moto
import moto.dynamodbstreams.models as stream_models
import moto.dynamodbstreams.responses as stream_responses
from moto.dynamodb.models.table import StreamRecord, StreamShard

from devstack._moto_patches import PAGE_LIMIT_BYTES, page_within_cap
from devstack.moto_server import MotoServer
from devstack.streams import read_stream
from pipeline.tables import TableDescription

MOTO = Path(moto.__file__).parent
PADDING = "x" * 1_100  # a stream record of about 1.2 KB: 1,000 of them are more than 1 MB


def _first_page(streams: Any, table: TableDescription) -> list[dict[str, Any]]:
    shard = streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=table.stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records: list[dict[str, Any]] = streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
    return records


def _write(dynamodb: Any, table: TableDescription, count: int) -> None:
    for start in range(0, count, 25):
        rows = [
            {
                "PutRequest": {
                    "Item": {"pk": {"S": f"USER#{i:05d}"}, "sk": {"S": "ROW"}, "pad": {"S": PADDING}}
                }
            }
            for i in range(start, min(count, start + 25))
        ]
        dynamodb.batch_write_item(RequestItems={table.table_name: rows})


def test_a_page_of_large_records_stops_at_1_mb(dynamodb: Any, streams: Any, table: TableDescription) -> None:
    _write(dynamodb, table, 1_000)
    page = _first_page(streams, table)
    assert sum(record["dynamodb"]["SizeBytes"] for record in page) <= PAGE_LIMIT_BYTES
    assert 0 < len(page) < 1_000


def test_the_pages_together_hold_every_record_once_in_order(
    dynamodb: Any, streams: Any, table: TableDescription
) -> None:
    _write(dynamodb, table, 1_200)
    numbers = [int(record["dynamodb"]["SequenceNumber"]) for record in read_stream(streams, table.stream_arn)]
    assert len(numbers) == 1_200
    assert numbers == sorted(set(numbers))


def test_a_page_of_small_records_is_not_cut(dynamodb: Any, streams: Any, table: TableDescription) -> None:
    for i in range(30):
        dynamodb.put_item(TableName=table.table_name, Item={"pk": {"S": f"USER#{i}"}, "sk": {"S": "ROW"}})
    assert len(_first_page(streams, table)) == 30


def test_a_record_larger_than_the_cap_is_still_returned_alone() -> None:
    huge = {"dynamodb": {"SizeBytes": PAGE_LIMIT_BYTES + 1}}
    small = {"dynamodb": {"SizeBytes": 10}}
    assert page_within_cap([huge, small]) == [huge]


def test_records_up_to_exactly_the_cap_stay_on_one_page() -> None:
    half = {"dynamodb": {"SizeBytes": PAGE_LIMIT_BYTES // 2}}
    assert len(page_within_cap([half, half, half])) == 2


def _defined_in_moto(function: Any) -> bool:
    """Whether the function's code is moto's own (`functools.wraps` copies a name and module, not code)."""
    return Path(function.__code__.co_filename).is_relative_to(MOTO)


def test_no_patch_replaces_a_function_on_the_stream_read_path_but_the_cap(moto_server: MotoServer) -> None:
    MotoServer()  # every install the local stack makes, again (each is idempotent)
    handler, backend, iterator = (
        stream_responses.DynamoDBStreamsHandler,
        stream_models.DynamoDBStreamsBackend,
        stream_models.ShardIterator,
    )
    read_path = [
        *(
            getattr(handler, name)
            for name in ("get_records", "get_shard_iterator", "describe_stream", "list_streams")
        ),
        *(
            getattr(backend, name)
            for name in ("get_records", "get_shard_iterator", "describe_stream", "list_streams")
        ),
        iterator.__init__,
        iterator.get,
        StreamRecord.to_json,
        StreamShard.to_json,
    ]
    assert [f.__qualname__ for f in read_path if not _defined_in_moto(f)] == []
    # The one patched function: the cap, around moto's own StreamShard.get.
    assert not _defined_in_moto(StreamShard.get)
    assert _defined_in_moto(StreamShard.get.__wrapped__)  # type: ignore[attr-defined]

"""Decoding throughput: stream record bytes in, typed event out (`pipeline.decode`).

The decoder is `decode_record`, the function the KCL child calls on every record, measured on realistic
entitlement MODIFY records in the adapter's JSON shape (relinks and status changes, distinct ids and
tokens). These records take its typed branch (msgspec decodes the bytes into the envelope and the wire
image derived from the item Structs); before timing, the run checks that the generic branch gives the
same events. Beside it, in the same run and on the same records:

- the same function with the typed branch switched off, so that every record takes the generic branch
  (orjson.loads, the strict attribute-value decoder, the same items and classification): what a record
  the service did not write costs;
- `decode_stream_record` on the same records in the raw (GetRecords/Lambda) shape;
- msgspec's decode of the same bytes into the typed branch's envelope alone: that branch's floor;
- AWS Lambda Powertools' `DynamoDBStreamModel` on the same records in the raw (Lambda) shape, in
  batches of 100 as Lambda delivers them, with pydantic's own JSON parser or after `orjson.loads`,
  whichever is faster: Powertools at its best;
- boto3's `TypeDeserializer` on the same records' images (after `orjson.loads`), untyped: decoding only;
- a bare `orjson.loads` of the same bytes: the floor any Python decoder of these bytes stands on.

Target: at least 3x Powertools. The same run feeds a fixed set of invalid records through the
decoder and counts how many it rejects with `DecodeError`.

Then, in the same run, the one decoder, Powertools, boto3's TypeDeserializer and bare `orjson.loads` again,
on records captured from the real daemon (`bench._capture`: devstack's simulator writes signups,
cancellations, reactivations, second signups and relinks to moto while the TTL emulator expires the
cancellation and stale records, so the stream also holds REMOVE records with the TTL identity; the
launcher JVM delivers the stream to the do-nothing kclpy child, which keeps each record's `data` bytes as
kclpy gives them). The capture is cached under `.cache/bench/` by version key; when absent, this bench
makes it first (the daemon's start makes that about a minute). On those records:

- the decoder is given each captured `data` as it is, with its KCL sequence number, the captured stream
  ARN and shard id: what the child does;
- Powertools is given them in the Lambda shape, converted as a Lambda event would hold the same record:
  `ApproximateCreationDateTime` from the adapter's epoch milliseconds to epoch seconds, `eventSourceARN`
  added, and the empty image the adapter renders for the side a change does not have (`NewImage: {}` of a
  REMOVE, `OldImage: {}` of an INSERT) dropped, as Lambda omits it; `userIdentity` is kept as it is
  (`principalId`/`type`, as in Lambda events); batches of 100 in stream order, converted before timing;
- boto3's TypeDeserializer decodes every attribute of each record's `Keys`, `NewImage` and `OldImage`
  after `orjson.loads` of the captured bytes (no conversion: it takes images);
- bare `orjson.loads` of the captured bytes.

Before timing, the run checks that every captured record takes the typed branch or, if not, says how many
do not, that the generic branch gives the same events, and that Powertools accepts every record.
"""

from __future__ import annotations

__all__ = ["main"]

import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import msgspec
import orjson
from aws_lambda_powertools.utilities.parser.models import DynamoDBStreamModel
from boto3.dynamodb.types import TypeDeserializer

import pipeline.decode as decode_module
from bench import _capture
from bench._report import Comparison, best_of, print_figures
from pipeline import (
    CleanupExpired,
    DecodeError,
    EntitlementStatusChanged,
    EntitlementUpdated,
    StreamEvent,
    decode_record,
    decode_stream_record,
)
from pipeline._attribute_values import encode_image

RECORDS = 2_000
REPEATS = 15
LAMBDA_BATCH = 100
STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-11-30T10:00:00.000"
SHARD_ID = "shardId-00000001732960800000-5f0e8c1a"
BASE_MILLIS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _iso(millis: int) -> str:
    seconds, ms = divmod(millis, 1000)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms:03d}Z"


def _entitlement_row(rng: random.Random, status: str, updated_millis: int) -> dict[str, Any]:
    user_id = f"{rng.getrandbits(128):032x}"
    account = f"acc_{rng.getrandbits(64):016x}"
    return {
        "pk": f"USER#{user_id}",
        "sk": f"ENTITLEMENT#{account}",
        "userId": user_id,
        "arrayAccountId": account,
        "status": status,
        "createdAt": _iso(updated_millis - rng.randrange(86_400_000, 90 * 86_400_000)),
        "updatedAt": _iso(updated_millis - rng.randrange(1, 86_400_000)),
        "processorToken": f"processor-sandbox-{rng.getrandbits(128):032x}",
        "gsi1pk": f"ARRAY#{account}",
        "gsi1sk": "ENTITLEMENT",
    }


def _modify_records(count: int, seed: int = 20261130) -> list[dict[str, Any]]:
    """Entitlement MODIFY stream records (adapter shape, epoch milliseconds): 60% relinks (token and
    updatedAt change, status kept), 40% status changes (Active to Cancelled or Superseded)."""
    rng = random.Random(seed)
    records = []
    sequence = 4_421_584_500_000_000_017_450_439_091
    for index in range(count):
        created_millis = BASE_MILLIS + index * 1_250 + rng.randrange(1_000)
        old = _entitlement_row(rng, "Active", created_millis)
        new = dict(old)
        new["updatedAt"] = _iso(created_millis)
        if rng.random() < 0.6:
            new["processorToken"] = f"processor-sandbox-{rng.getrandbits(128):032x}"
        else:
            new["status"] = rng.choice(["Cancelled", "Superseded"])
        sequence += rng.randrange(1, 10_000)
        records.append(
            {
                "eventID": f"{rng.getrandbits(128):032x}",
                "eventName": "MODIFY",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "eu-west-1",
                "dynamodb": {
                    "ApproximateCreationDateTime": created_millis,
                    "Keys": encode_image({"pk": old["pk"], "sk": old["sk"]}),
                    "NewImage": encode_image(new),
                    "OldImage": encode_image(old),
                    "SequenceNumber": str(sequence),
                    "SizeBytes": 600 + rng.randrange(100),
                    "StreamViewType": "NEW_AND_OLD_IMAGES",
                },
            }
        )
    return records


def _raw_shape(record: dict[str, Any]) -> dict[str, Any]:
    """The same record as GetRecords/Lambda give it: epoch seconds, and (Lambda) eventSourceARN."""
    raw = dict(record)
    raw["dynamodb"] = dict(record["dynamodb"])
    raw["dynamodb"]["ApproximateCreationDateTime"] = record["dynamodb"]["ApproximateCreationDateTime"] / 1000
    raw["eventSourceARN"] = STREAM_ARN
    return raw


def _invalid_records(valid: dict[str, Any]) -> list[bytes]:
    """A fixed set of records the path must refuse: one broken rule each."""

    def broken(change: Callable[[dict[str, Any]], None]) -> bytes:
        record = orjson.loads(orjson.dumps(valid))
        change(record)
        return orjson.dumps(record)

    def set_attribute(name: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda r: r["dynamodb"]["NewImage"].__setitem__(name, value)

    return [
        b"",
        b"not json",
        b"[1, 2, 3]",
        orjson.dumps(valid)[:-7],  # truncated
        broken(lambda r: r.pop("eventID")),
        broken(lambda r: r.__setitem__("eventName", "UPSERT")),
        broken(lambda r: r.pop("dynamodb")),
        broken(lambda r: r["dynamodb"].pop("SequenceNumber")),
        broken(lambda r: r["dynamodb"].__setitem__("SequenceNumber", "12ab")),
        broken(lambda r: r["dynamodb"].pop("ApproximateCreationDateTime")),
        broken(lambda r: r["dynamodb"].__setitem__("ApproximateCreationDateTime", "yesterday")),
        broken(lambda r: r["dynamodb"].pop("Keys")),
        broken(set_attribute("status", {"S": "Active", "N": "1"})),  # two type keys
        broken(set_attribute("status", {})),  # no type key
        broken(set_attribute("score", {"N": "1234567890123456789012345678901234567.89"})),  # 39 digits
        broken(set_attribute("score", {"N": "1E+126"})),  # beyond DynamoDB's range
        broken(set_attribute("score", {"N": "NaN"})),
        broken(set_attribute("blob", {"B": "not base64!"})),
        broken(set_attribute("flag", {"BOOL": "true"})),
        broken(set_attribute("tags", {"SS": []})),  # sets are never empty
        broken(set_attribute("tags", {"SS": ["a", "a"]})),  # nor hold duplicates
        broken(set_attribute("mystery", {"X": "1"})),  # unknown type key
        broken(lambda r: r.__setitem__("userIdentity", {"kind": "Service"})),
    ]


def _rates(contenders: dict[str, Callable[[int], Any]], chunks: Sequence[Sequence[int]]) -> dict[str, float]:
    """Records per second of each contender: per chunk the best of REPEATS runs, summed over chunks."""
    seconds = dict.fromkeys(contenders, 0.0)
    for chunk in range(len(chunks)):
        for name, fn in contenders.items():  # interleaved: a slow spell hits every contender alike
            seconds[name] += best_of(REPEATS, lambda fn=fn, chunk=chunk: fn(chunk))  # type: ignore[misc]
    records = sum(len(chunk) for chunk in chunks)
    return {name: records / spent for name, spent in seconds.items()}


def _batches(count: int) -> list[range]:
    """The records' indexes in chunks of one Lambda batch."""
    return [range(start, min(start + LAMBDA_BATCH, count)) for start in range(0, count, LAMBDA_BATCH)]


def _rejections(valid: dict[str, Any]) -> tuple[int, list[bytes]]:
    """How many of the fixed invalid records the production path refuses with DecodeError, of which."""
    invalid = _invalid_records(valid)
    rejected = 0
    for data in invalid:
        try:
            decode_record(data, stream_arn=STREAM_ARN, shard_id=SHARD_ID)
        except DecodeError:
            rejected += 1
    return rejected, invalid


def _typed_branch_off(data: Any) -> Any:
    raise msgspec.DecodeError("the typed branch is off")


def _bench_records() -> None:
    records = _modify_records(RECORDS)
    adapter_bytes = [orjson.dumps(record) for record in records]
    raw_records = [_raw_shape(record) for record in records]
    raw_bytes = [orjson.dumps(record) for record in raw_records]
    sequences = [record["dynamodb"]["SequenceNumber"] for record in records]
    # The records are timed in chunks of one Lambda batch; each chunk's time is the best of REPEATS
    # runs and a contender's time is the sum over chunks. Short timed runs, each the best of many,
    # keep a busy machine's interruptions out of the figures.
    chunks = _batches(RECORDS)
    lambda_batches = [orjson.dumps({"Records": [raw_records[i] for i in chunk]}) for chunk in chunks]
    typed_decode = decode_module._decode_typed

    shared = _contenders(
        adapter_bytes, sequences, lambda_batches, chunks, stream_arn=STREAM_ARN, shard_id=SHARD_ID
    )
    decoder, generic_branch = shared["decoder"], shared["generic"]
    powertools_json, boto3_images = shared["powertools_json"], shared["boto3"]

    def typed_envelope(chunk: int) -> list[Any]:
        return [typed_decode(adapter_bytes[i]) for i in chunks[chunk]]

    def raw_path(chunk: int) -> list[Any]:
        return [
            decode_stream_record(orjson.loads(raw_bytes[i]), stream_arn=STREAM_ARN, shard_id=SHARD_ID)
            for i in chunks[chunk]
        ]

    contenders: dict[str, Callable[[int], Any]] = {
        "decoder": decoder,
        "generic": generic_branch,
        "typed_envelope": typed_envelope,
        "raw_path": raw_path,
        "powertools_json": powertools_json,
        "powertools_dict": shared["powertools_dict"],
        "boto3": boto3_images,
        "orjson": shared["orjson"],
    }

    # Correctness first: every record decodes to the event its change implies, in both shapes and both
    # branches, and the typed branch is the one these records take.
    events = [event for chunk in range(len(chunks)) for event in decoder(chunk)]
    kinds = [type(event) for event in events]
    assert set(kinds) <= {EntitlementUpdated, EntitlementStatusChanged}, "unexpected event types"
    assert events == [event for chunk in range(len(chunks)) for event in generic_branch(chunk)]
    raw_kinds = [type(event) for chunk in range(len(chunks)) for event in raw_path(chunk)]
    assert raw_kinds == kinds, "the two shapes disagree"
    assert len([typed_decode(data) for data in adapter_bytes]) == RECORDS
    assert sum(len(powertools_json(chunk).Records) for chunk in range(len(chunks))) == RECORDS
    assert all(isinstance(value, Decimal | str) for image in boto3_images(0)[0] for value in image.values())

    rate = _rates(contenders, chunks)
    powertools_way, powertools = _powertools_best(rate)
    powertools_name = f"Powertools DynamoDBStreamModel ({powertools_way}, batches of {LAMBDA_BATCH})"

    rejected, invalid = _rejections(records[0])

    size = sum(len(data) for data in adapter_bytes) / len(adapter_bytes)
    decoder_name = "decode_record (adapter bytes -> typed event)"
    print(
        f"\n{RECORDS} entitlement MODIFY records, {size:.0f} bytes each on average: "
        f"{kinds.count(EntitlementUpdated)} relinks, {kinds.count(EntitlementStatusChanged)} status changes"
    )
    print_figures(
        "decode: stream record throughput",
        [
            *_shared_figures(decoder_name, rate, powertools_name, powertools),
            Comparison(
                "decode_stream_record (raw shape: orjson.loads + decode)",
                rate["raw_path"],
                "records/s",
                powertools_name,
                powertools,
            ),
            Comparison(
                "floor of the typed branch: msgspec's decode into its envelope alone",
                rate["typed_envelope"],
                "records/s",
                "bare orjson.loads of the same bytes",
                rate["orjson"],
            ),
            Comparison(
                "invalid records rejected with DecodeError",
                float(rejected),
                "records",
                "invalid records given",
                float(len(invalid)),
                target="ratio = 1.00",
                met=rejected == len(invalid),
            ),
        ],
    )


def _lambda_shape(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A captured adapter record as a Lambda event holds it (the conversion: the module's docstring)."""
    ddb = dict(record["dynamodb"])
    ddb["ApproximateCreationDateTime"] = ddb["ApproximateCreationDateTime"] / 1000
    for side in ("NewImage", "OldImage"):
        if ddb.get(side) == {}:
            del ddb[side]
    return {**record, "dynamodb": ddb, "eventSourceARN": stream_arn}


def _captured_contenders(
    capture: _capture.Capture, chunks: Sequence[Sequence[int]]
) -> dict[str, Callable[[int], Any]]:
    """The contenders on the captured records, chunk by chunk (each chunk a list of record indexes)."""
    datas = [data for _, data in capture.records]
    lambda_batches = [
        orjson.dumps({"Records": [_lambda_shape(orjson.loads(datas[i]), capture.stream_arn) for i in chunk]})
        for chunk in chunks
    ]
    return _contenders(
        datas,
        [number for number, _ in capture.records],
        lambda_batches,
        chunks,
        stream_arn=capture.stream_arn,
        shard_id=capture.shard_id,
    )


def _contenders(
    datas: Sequence[bytes],
    numbers: Sequence[str],
    lambda_batches: Sequence[bytes],
    chunks: Sequence[Sequence[int]],
    *,
    stream_arn: str,
    shard_id: str,
) -> dict[str, Callable[[int], Any]]:
    """The contenders both benches time, chunk by chunk: the decoder (and its generic branch alone) on
    the adapter's bytes `datas` (sequence numbers `numbers`), Powertools both ways on each chunk's Lambda
    batch, boto3's TypeDeserializer and bare orjson on the same bytes."""
    deserializer = TypeDeserializer()
    typed_decode = decode_module._decode_typed

    def decoder(chunk: int) -> list[StreamEvent]:
        return [
            decode_record(datas[i], stream_arn=stream_arn, shard_id=shard_id, sequence_number=numbers[i])
            for i in chunks[chunk]
        ]

    def generic_branch(chunk: int) -> list[StreamEvent]:
        decode_module._decode_typed = _typed_branch_off
        try:
            return decoder(chunk)
        finally:
            decode_module._decode_typed = typed_decode

    def powertools_json(chunk: int) -> Any:
        return DynamoDBStreamModel.model_validate_json(lambda_batches[chunk])

    def powertools_dict(chunk: int) -> Any:
        return DynamoDBStreamModel.model_validate(orjson.loads(lambda_batches[chunk]))

    def boto3_images(chunk: int) -> list[Any]:
        out = []
        for i in chunks[chunk]:
            ddb = orjson.loads(datas[i])["dynamodb"]
            out.append(
                [
                    {name: deserializer.deserialize(av) for name, av in ddb.get(section, {}).items()}
                    for section in ("Keys", "NewImage", "OldImage")
                ]
            )
        return out

    def bare_orjson(chunk: int) -> list[Any]:
        return [orjson.loads(datas[i]) for i in chunks[chunk]]

    return {
        "decoder": decoder,
        "generic": generic_branch,
        "powertools_json": powertools_json,
        "powertools_dict": powertools_dict,
        "boto3": boto3_images,
        "orjson": bare_orjson,
    }


def _powertools_best(rate: dict[str, float]) -> tuple[str, float]:
    """Powertools at its best of its two ways: how, and its rate."""
    way = (
        "model_validate_json"
        if rate["powertools_json"] >= rate["powertools_dict"]
        else "orjson.loads + model_validate"
    )
    return way, max(rate["powertools_json"], rate["powertools_dict"])


def _shared_figures(
    decoder_name: str, rate: dict[str, float], powertools_name: str, powertools: float
) -> list[Comparison]:
    """The figures both benches print: the decoder against Powertools (the target), boto3 and bare
    orjson, and the generic branch alone against Powertools."""
    return [
        Comparison(
            decoder_name,
            rate["decoder"],
            "records/s",
            powertools_name,
            powertools,
            target="ratio >= 3",
            met=rate["decoder"] / powertools >= 3,
        ),
        Comparison(
            decoder_name,
            rate["decoder"],
            "records/s",
            "boto3 TypeDeserializer (orjson.loads + Keys/NewImage/OldImage, untyped)",
            rate["boto3"],
        ),
        Comparison(
            decoder_name,
            rate["decoder"],
            "records/s",
            "bare orjson.loads of the same bytes",
            rate["orjson"],
        ),
        Comparison(
            "decode_record, typed branch off (generic branch: orjson.loads + strict AV decode)",
            rate["generic"],
            "records/s",
            powertools_name,
            powertools,
        ),
    ]


def _captured_records() -> None:
    capture = _capture.load()
    count = len(capture.records)
    datas = [data for _, data in capture.records]
    chunks = _batches(count)
    contenders = _captured_contenders(capture, chunks)
    decoder, generic_branch = contenders["decoder"], contenders["generic"]
    powertools_json, boto3_images = contenders["powertools_json"], contenders["boto3"]
    typed_decode = decode_module._decode_typed

    # Correctness first: both branches give the same events, and every contender takes every record.
    events = [event for chunk in range(len(chunks)) for event in decoder(chunk)]
    assert events == [event for chunk in range(len(chunks)) for event in generic_branch(chunk)]
    untyped = 0
    for data in datas:
        try:
            typed_decode(data)
        except msgspec.MsgspecError:
            untyped += 1
    assert sum(len(powertools_json(chunk).Records) for chunk in range(len(chunks))) == count
    assert sum(len(boto3_images(chunk)) for chunk in range(len(chunks))) == count

    rate = _rates(contenders, chunks)
    powertools_way, powertools = _powertools_best(rate)
    powertools_name = (
        f"Powertools DynamoDBStreamModel ({powertools_way}, Lambda shape, batches of {LAMBDA_BATCH})"
    )

    # The decoder and Powertools by event kind, each kind's records on their own in batches of 100:
    # where the ratio comes from, since the capture's mix differs from the bench's all-MODIFY records.
    by_kind: dict[str, list[int]] = {}
    for index, event in enumerate(events):
        by_kind.setdefault(type(event).__name__, []).append(index)
    kind_figures = []
    for kind, indexes in sorted(by_kind.items(), key=lambda item: -len(item[1])):
        kind_chunks = [
            indexes[start : start + LAMBDA_BATCH] for start in range(0, len(indexes), LAMBDA_BATCH)
        ]
        kind_contenders = _captured_contenders(capture, kind_chunks)
        kind_rate = _rates(
            {name: kind_contenders[name] for name in ("decoder", "powertools_json", "powertools_dict")},
            kind_chunks,
        )
        kind_way, kind_powertools = _powertools_best(kind_rate)
        kind_figures.append(
            Comparison(
                f"  {kind} alone ({len(indexes)} records): decode_record",
                kind_rate["decoder"],
                "records/s",
                f"Powertools ({kind_way})",
                kind_powertools,
            )
        )

    kinds = {kind: len(indexes) for kind, indexes in by_kind.items()}
    ttl_deletions = sum(1 for event in events if isinstance(event, CleanupExpired) and event.ttl_deletion)
    size = sum(len(data) for data in datas) / count
    mix = ", ".join(f"{n} {name}" for name, n in sorted(kinds.items(), key=lambda item: -item[1]))
    print(
        f"\n{count} records captured from the daemon ({capture.path.name}), {size:.0f} bytes each on "
        f"average: {mix}; {ttl_deletions} of them TTL deletions (REMOVE, TTL identity); "
        f"{count - untyped} take the typed branch, {untyped} the generic one"
    )
    decoder_name = "decode_record (captured adapter bytes -> typed event)"
    print_figures(
        "decode: records captured from the daemon",
        [
            *_shared_figures(decoder_name, rate, powertools_name, powertools),
            *kind_figures,
        ],
    )


def main() -> None:
    _bench_records()
    _captured_records()

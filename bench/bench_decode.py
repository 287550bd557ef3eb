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

Target (issue 10): at least 3x Powertools. The same run feeds a fixed set of invalid records through the
decoder and counts how many it rejects with `DecodeError`.
"""

from __future__ import annotations

__all__ = ["main"]

import random
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import msgspec
import orjson
from aws_lambda_powertools.utilities.parser.models import DynamoDBStreamModel
from boto3.dynamodb.types import TypeDeserializer

import pipeline.decode as decode_module
from bench._report import Figure, best_of, print_figures
from pipeline._attribute_values import encode_image
from pipeline.decode import decode_record, decode_stream_record
from pipeline.errors import DecodeError
from pipeline.events import EntitlementStatusChanged, EntitlementUpdated, StreamEvent

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


def _rates(contenders: dict[str, Callable[[int], Any]], chunks: int) -> dict[str, float]:
    """Records per second of each contender: per chunk the best of REPEATS runs, summed over chunks."""
    seconds = dict.fromkeys(contenders, 0.0)
    for chunk in range(chunks):
        for name, fn in contenders.items():  # interleaved: a slow spell hits every contender alike
            seconds[name] += best_of(REPEATS, lambda fn=fn, chunk=chunk: fn(chunk))  # type: ignore[misc]
    return {name: RECORDS / spent for name, spent in seconds.items()}


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


def main() -> None:
    records = _modify_records(RECORDS)
    adapter_bytes = [orjson.dumps(record) for record in records]
    raw_records = [_raw_shape(record) for record in records]
    raw_bytes = [orjson.dumps(record) for record in raw_records]
    sequences = [record["dynamodb"]["SequenceNumber"] for record in records]
    # The records are timed in chunks of one Lambda batch; each chunk's time is the best of REPEATS
    # runs and a contender's time is the sum over chunks. Short timed runs, each the best of many,
    # keep a busy machine's interruptions out of the figures.
    chunks = [range(start, min(start + LAMBDA_BATCH, RECORDS)) for start in range(0, RECORDS, LAMBDA_BATCH)]
    lambda_batches = [orjson.dumps({"Records": [raw_records[i] for i in chunk]}) for chunk in chunks]
    deserializer = TypeDeserializer()
    typed_decode = decode_module._decode_typed

    def decoder(chunk: int) -> list[StreamEvent]:
        return [
            decode_record(
                adapter_bytes[i], stream_arn=STREAM_ARN, shard_id=SHARD_ID, sequence_number=sequences[i]
            )
            for i in chunks[chunk]
        ]

    def generic_branch(chunk: int) -> list[StreamEvent]:
        decode_module._decode_typed = _typed_branch_off
        try:
            return decoder(chunk)
        finally:
            decode_module._decode_typed = typed_decode

    def typed_envelope(chunk: int) -> list[Any]:
        return [typed_decode(adapter_bytes[i]) for i in chunks[chunk]]

    def raw_path(chunk: int) -> list[Any]:
        return [
            decode_stream_record(orjson.loads(raw_bytes[i]), stream_arn=STREAM_ARN, shard_id=SHARD_ID)
            for i in chunks[chunk]
        ]

    def powertools_json(chunk: int) -> Any:
        return DynamoDBStreamModel.model_validate_json(lambda_batches[chunk])

    def powertools_dict(chunk: int) -> Any:
        return DynamoDBStreamModel.model_validate(orjson.loads(lambda_batches[chunk]))

    def boto3_images(chunk: int) -> list[Any]:
        out = []
        for i in chunks[chunk]:
            ddb = orjson.loads(adapter_bytes[i])["dynamodb"]
            out.append(
                [
                    {name: deserializer.deserialize(av) for name, av in ddb[section].items()}
                    for section in ("Keys", "NewImage", "OldImage")
                ]
            )
        return out

    def bare_orjson(chunk: int) -> list[Any]:
        return [orjson.loads(adapter_bytes[i]) for i in chunks[chunk]]

    contenders: dict[str, Callable[[int], Any]] = {
        "decoder": decoder,
        "generic": generic_branch,
        "typed_envelope": typed_envelope,
        "raw_path": raw_path,
        "powertools_json": powertools_json,
        "powertools_dict": powertools_dict,
        "boto3": boto3_images,
        "orjson": bare_orjson,
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

    rate = _rates(contenders, len(chunks))
    powertools_way = (
        "model_validate_json"
        if rate["powertools_json"] >= rate["powertools_dict"]
        else "orjson.loads + model_validate"
    )
    powertools = max(rate["powertools_json"], rate["powertools_dict"])
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
            Figure(
                decoder_name,
                rate["decoder"],
                "records/s",
                powertools_name,
                powertools,
                target="ratio >= 3",
                met=rate["decoder"] / powertools >= 3,
            ),
            Figure(
                decoder_name,
                rate["decoder"],
                "records/s",
                "boto3 TypeDeserializer (orjson.loads + Keys/NewImage/OldImage, untyped)",
                rate["boto3"],
            ),
            Figure(
                decoder_name,
                rate["decoder"],
                "records/s",
                "bare orjson.loads of the same bytes",
                rate["orjson"],
            ),
            Figure(
                "decode_record, typed branch off (generic branch: orjson.loads + strict AV decode)",
                rate["generic"],
                "records/s",
                powertools_name,
                powertools,
            ),
            Figure(
                "decode_stream_record (raw shape: orjson.loads + decode)",
                rate["raw_path"],
                "records/s",
                powertools_name,
                powertools,
            ),
            Figure(
                "floor of the typed branch: msgspec's decode into its envelope alone",
                rate["typed_envelope"],
                "records/s",
                "bare orjson.loads of the same bytes",
                rate["orjson"],
            ),
            Figure(
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

"""Kinesis Data Streams for DynamoDB records for the tests: the documented envelope (awsRegion, eventID,
eventName, userIdentity, recordFormat, tableName, eventSource, dynamodb with ApproximateCreationDateTime,
Keys, NewImage, OldImage, SizeBytes; no SequenceNumber, no StreamViewType), made from the adapter's
records in tests/pipeline/fixtures/entitlements_adapter_records.json (the same changes)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from pipeline.decode import KinesisSource, decode_record
from pipeline.events import StreamEvent

FIXTURES = Path(__file__).parent / "fixtures"
TABLE = "entitlements"
KINESIS_ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/entitlements-changes"
STREAMS_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-11-30T10:00:00.000"
SHARD = "shardId-000000000003"
# A Kinesis sequence number as AWS writes them: 56 digits.
KINESIS_SEQUENCE = "49546986683135544286507457936321625675700192471156785154"


def adapter_records() -> dict[str, dict[str, Any]]:
    """The adapter's records of the entitlements table, by name."""
    loaded: dict[str, Any] = json.loads((FIXTURES / "entitlements_adapter_records.json").read_text())
    return {name: record for name, record in loaded.items() if not name.startswith("_")}


def kinesis_envelope(adapter_record: dict[str, Any], *, micros: bool = False) -> dict[str, Any]:
    """The Kinesis envelope of the same change; its time in microseconds when `micros`."""
    record = copy.deepcopy(adapter_record)
    change = record["dynamodb"]
    del change["SequenceNumber"], change["StreamViewType"]
    if micros:
        change["ApproximateCreationDateTime"] *= 1000
    record.pop("eventVersion", None)
    record.setdefault("userIdentity", None)  # Kinesis writes null where the DynamoDB stream omits it
    record["recordFormat"] = "application/json"
    record["tableName"] = TABLE
    return record


def data(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode()


def decode_kinesis(
    record: dict[str, Any],
    *,
    source: KinesisSource | None = None,
    shard_id: str = SHARD,
    sequence_number: str | None = KINESIS_SEQUENCE,
) -> StreamEvent:
    return decode_record(
        data(record),
        stream_arn=KINESIS_ARN,
        shard_id=shard_id,
        sequence_number=sequence_number,
        kinesis=source if source is not None else KinesisSource(TABLE),
    )


def entitlement_change(
    *,
    event_id: str,
    created: int,
    old_status: str | None,
    new_status: str | None,
    user: str = "u-1",
    account: str = "acc-1",
    identity: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Kinesis record of one change of a user's entitlement row (None status: no image on that side);
    `created` in the envelope's unit (ms or us)."""

    def image(status: str) -> dict[str, Any]:
        return {
            "pk": {"S": f"USER#{user}"},
            "sk": {"S": f"ENTITLEMENT#{account}"},
            "userId": {"S": user},
            "arrayAccountId": {"S": account},
            "status": {"S": status},
            "createdAt": {"S": "2026-03-01T12:00:00.000Z"},
            "updatedAt": {"S": "2026-03-01T12:00:00.000Z"},
        }

    if old_status is None:
        name = "INSERT"
    elif new_status is None:
        name = "REMOVE"
    else:
        name = "MODIFY"
    change: dict[str, Any] = {
        "ApproximateCreationDateTime": created,
        "Keys": {"pk": {"S": f"USER#{user}"}, "sk": {"S": f"ENTITLEMENT#{account}"}},
        "SizeBytes": 300,
    }
    if new_status is not None:
        change["NewImage"] = image(new_status)
    if old_status is not None:
        change["OldImage"] = image(old_status)
    return {
        "awsRegion": "eu-west-1",
        "eventID": event_id,
        "eventName": name,
        "userIdentity": identity,
        "recordFormat": "application/json",
        "tableName": TABLE,
        "eventSource": "aws:dynamodb",
        "dynamodb": change,
    }

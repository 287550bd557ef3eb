"""The local stack's point-in-time export writes DynamoDB's layout, at the time it says (devstack.export)."""

from __future__ import annotations

import gzip
import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from devstack.export import DEFAULT_ITEMS_PER_FILE, install_faithful_export
from pipeline.tables import TableDescription
from tests.support.dynamodb import client


@pytest.fixture
def s3(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "s3")


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"export-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    return name


@pytest.fixture
def three_per_file() -> Iterator[None]:
    install_faithful_export(items_per_file=3)
    yield
    install_faithful_export(items_per_file=DEFAULT_ITEMS_PER_FILE)


@pytest.fixture
def recoverable(dynamodb: Any, table: TableDescription) -> TableDescription:
    dynamodb.update_continuous_backups(
        TableName=table.table_name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    return table


def _put(dynamodb: Any, table: TableDescription, index: int) -> None:
    dynamodb.put_item(
        TableName=table.table_name,
        Item={
            "pk": {"S": f"USER#u{index}"},
            "sk": {"S": "ENTITLEMENT#a"},
            "amount": {"N": "12345678901234567890.123456789"},
            "blob": {"B": bytes([0, index % 256])},
            "tags": {"SS": ["x", "y"]},
        },
    )


def _finished(dynamodb: Any, arn: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        described: dict[str, Any] = dynamodb.describe_export(ExportArn=arn)["ExportDescription"]
        if described["ExportStatus"] != "IN_PROGRESS":
            return described
        time.sleep(0.02)
    raise AssertionError("the export did not finish in 30 s")


def _export(dynamodb: Any, table: TableDescription, bucket: str, **extra: Any) -> dict[str, Any]:
    started: dict[str, Any] = dynamodb.export_table_to_point_in_time(
        TableArn=table.table_arn, S3Bucket=bucket, S3Prefix="exports/run1", **extra
    )["ExportDescription"]
    return started


def _body(s3: Any, bucket: str, key: str) -> bytes:
    data: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return data


def _data_items(s3: Any, bucket: str, summary: dict[str, Any]) -> list[dict[str, Any]]:
    items = []
    for line in _body(s3, bucket, summary["manifestFilesS3Key"]).decode().splitlines():
        entry = json.loads(line)
        for row in gzip.decompress(_body(s3, bucket, entry["dataFileS3Key"])).decode().splitlines():
            items.append(json.loads(row))
    return items


def test_an_export_starts_in_progress_then_completes_with_its_manifests(
    dynamodb: Any, s3: Any, recoverable: TableDescription, bucket: str
) -> None:
    _put(dynamodb, recoverable, 1)
    started = _export(dynamodb, recoverable, bucket)
    assert started["ExportStatus"] == "IN_PROGRESS"
    finished = _finished(dynamodb, started["ExportArn"])
    assert finished["ExportStatus"] == "COMPLETED"
    export_id = started["ExportArn"].rsplit("/", 1)[1]
    base = f"exports/run1/AWSDynamoDB/{export_id}"
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert {
        f"{base}/_started",
        f"{base}/manifest-summary.json",
        f"{base}/manifest-summary.checksum",
        f"{base}/manifest-files.json",
        f"{base}/manifest-files.checksum",
    } <= keys
    assert finished["ExportManifest"] == f"{base}/manifest-summary.json"


def test_the_export_id_and_arn_have_dynamodbs_shape(
    dynamodb: Any, recoverable: TableDescription, bucket: str
) -> None:
    arn = _export(dynamodb, recoverable, bucket)["ExportArn"]
    table_arn, export_id = arn.split("/export/")
    assert table_arn == recoverable.table_arn
    digits, hex_part = export_id.split("-")
    assert len(digits) == 14 and digits.isdigit()
    assert len(hex_part) == 8 and int(hex_part, 16) >= 0


def test_the_summary_says_what_describe_export_says(
    dynamodb: Any, s3: Any, recoverable: TableDescription, bucket: str
) -> None:
    for index in range(4):
        _put(dynamodb, recoverable, index)
    finished = _finished(dynamodb, _export(dynamodb, recoverable, bucket)["ExportArn"])
    summary = json.loads(_body(s3, bucket, finished["ExportManifest"]))
    assert summary["version"] == "2020-06-30"
    assert summary["exportArn"] == finished["ExportArn"]
    assert summary["tableArn"] == recoverable.table_arn
    assert summary["tableId"] == finished["TableId"]
    assert summary["itemCount"] == finished["ItemCount"] == 4
    assert summary["outputFormat"] == "DYNAMODB_JSON"
    assert summary["exportType"] == "FULL_EXPORT"
    assert summary["s3Bucket"] == bucket and summary["s3Prefix"] == "exports/run1"
    exported_at = datetime.strptime(summary["exportTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert exported_at == finished["ExportTime"].astimezone(UTC)


def test_each_data_file_is_listed_with_its_count_and_checksum(
    dynamodb: Any, s3: Any, recoverable: TableDescription, bucket: str, three_per_file: None
) -> None:
    for index in range(10):
        _put(dynamodb, recoverable, index)
    finished = _finished(dynamodb, _export(dynamodb, recoverable, bucket)["ExportArn"])
    summary = json.loads(_body(s3, bucket, finished["ExportManifest"]))
    entries = [json.loads(line) for line in _body(s3, bucket, summary["manifestFilesS3Key"]).splitlines()]
    assert len(entries) == 4  # ten items, at most three a file
    for entry in entries:
        body = _body(s3, bucket, entry["dataFileS3Key"])
        assert entry["dataFileS3Key"].endswith(".json.gz") and "/data/" in entry["dataFileS3Key"]
        assert entry["etag"] == hashlib.md5(body, usedforsecurity=False).hexdigest()
        assert entry["itemCount"] == len(gzip.decompress(body).splitlines())
    assert sum(e["itemCount"] for e in entries) == 10


def test_data_lines_are_items_in_dynamodb_json_with_every_type_as_stored(
    dynamodb: Any, s3: Any, recoverable: TableDescription, bucket: str
) -> None:
    _put(dynamodb, recoverable, 7)
    finished = _finished(dynamodb, _export(dynamodb, recoverable, bucket)["ExportArn"])
    summary = json.loads(_body(s3, bucket, finished["ExportManifest"]))
    (line,) = _data_items(s3, bucket, summary)
    item = line["Item"]
    assert set(line) == {"Item"}
    assert item["amount"] == {"N": "12345678901234567890.123456789"}
    assert item["blob"] == {"B": "AAc="}  # base64, as DynamoDB's JSON writes binary
    assert sorted(item["tags"]["SS"]) == ["x", "y"]


def test_the_export_holds_every_write_before_the_request_and_none_after(
    dynamodb: Any, s3: Any, recoverable: TableDescription, bucket: str
) -> None:
    for index in range(5):
        _put(dynamodb, recoverable, index)
    started = _export(dynamodb, recoverable, bucket)
    for index in range(5, 9):  # written while the export's files are still being written, or after
        _put(dynamodb, recoverable, index)
    finished = _finished(dynamodb, started["ExportArn"])
    summary = json.loads(_body(s3, bucket, finished["ExportManifest"]))
    exported = {line["Item"]["pk"]["S"] for line in _data_items(s3, bucket, summary)}
    assert exported == {f"USER#u{index}" for index in range(5)}


def test_export_time_lies_between_the_writes_before_and_after(
    dynamodb: Any, recoverable: TableDescription, bucket: str
) -> None:
    before = datetime.now(UTC)
    started = _export(dynamodb, recoverable, bucket)
    after = datetime.now(UTC)
    exported_at = started["ExportTime"].astimezone(UTC)
    # Millisecond precision: the export time is truncated to its millisecond.
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= exported_at <= after


def test_a_table_without_point_in_time_recovery_is_refused(
    dynamodb: Any, table: TableDescription, bucket: str
) -> None:
    with pytest.raises(ClientError) as refused:
        _export(dynamodb, table, bucket)
    assert refused.value.response["Error"]["Code"] == "PointInTimeRecoveryUnavailableException"


@pytest.mark.parametrize(
    "extra", [{"ExportFormat": "ION"}, {"ExportType": "INCREMENTAL_EXPORT"}, {"ExportTime": 1_000_000}]
)
def test_what_this_stack_cannot_write_is_refused_not_faked(
    dynamodb: Any, recoverable: TableDescription, bucket: str, extra: dict[str, Any]
) -> None:
    with pytest.raises(ClientError) as refused:
        _export(dynamodb, recoverable, bucket, **extra)
    assert refused.value.response["Error"]["Code"] == "ValidationException"


def test_a_missing_bucket_fails_the_export(dynamodb: Any, recoverable: TableDescription) -> None:
    started = _export(dynamodb, recoverable, f"absent-{uuid.uuid4().hex[:8]}")
    finished = _finished(dynamodb, started["ExportArn"])
    assert finished["ExportStatus"] == "FAILED"
    assert finished["FailureCode"] == "S3NoSuchBucket"


def test_the_same_client_token_returns_the_same_export(
    dynamodb: Any, recoverable: TableDescription, bucket: str
) -> None:
    token = uuid.uuid4().hex
    first = _export(dynamodb, recoverable, bucket, ClientToken=token)
    second = _export(dynamodb, recoverable, bucket, ClientToken=token)
    assert first["ExportArn"] == second["ExportArn"]


def test_an_unknown_export_is_not_found(dynamodb: Any, recoverable: TableDescription) -> None:
    with pytest.raises(ClientError) as refused:
        dynamodb.describe_export(ExportArn=f"{recoverable.table_arn}/export/00000000000000-00000000")
    assert refused.value.response["Error"]["Code"] == "ExportNotFoundException"


def test_list_exports_names_the_tables_exports(
    dynamodb: Any, recoverable: TableDescription, bucket: str
) -> None:
    arn = _export(dynamodb, recoverable, bucket)["ExportArn"]
    _finished(dynamodb, arn)
    listed = dynamodb.list_exports(TableArn=recoverable.table_arn)["ExportSummaries"]
    assert [e["ExportArn"] for e in listed] == [arn]

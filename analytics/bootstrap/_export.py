"""Starting a point-in-time export and waiting for it (DynamoDB's ExportTableToPointInTime and
DescribeExport). The export is DynamoDB's own work: it reads no capacity from the table."""

from __future__ import annotations

__all__ = ["DynamoDBExports", "ExportLocation", "start_export", "wait_for_export"]

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from analytics.bootstrap._errors import BootstrapRefused
from schema.aws_errors import converted


class DynamoDBExports(Protocol):
    def export_table_to_point_in_time(self, **kwargs: Any) -> dict[str, Any]: ...
    def describe_export(self, **kwargs: Any) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ExportLocation:
    export_arn: str
    bucket: str
    summary_key: str


def start_export(dynamodb: DynamoDBExports, *, table_arn: str, bucket: str, prefix: str) -> str:
    """Start a full DYNAMODB_JSON export of the table as it is now; returns the export's ARN."""
    with converted("DynamoDB ExportTableToPointInTime"):
        described = dynamodb.export_table_to_point_in_time(
            TableArn=table_arn,
            S3Bucket=bucket,
            S3Prefix=prefix,
            ExportFormat="DYNAMODB_JSON",
            ExportType="FULL_EXPORT",
            ClientToken=uuid.uuid4().hex,
        )["ExportDescription"]
    arn: str = described["ExportArn"]
    return arn


def wait_for_export(
    dynamodb: DynamoDBExports,
    export_arn: str,
    *,
    poll_seconds: float,
    timeout_seconds: float,
    progress: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> ExportLocation:
    """Wait until the export is COMPLETED (a progress line each poll) and say where its summary is;
    a FAILED export or one still running after `timeout_seconds` is refused."""
    deadline = monotonic() + timeout_seconds
    while True:
        with converted("DynamoDB DescribeExport"):
            described = dynamodb.describe_export(ExportArn=export_arn)["ExportDescription"]
        status = described.get("ExportStatus")
        if status == "COMPLETED":
            progress(f"export completed: {described.get('ItemCount', '?')} items")
            return ExportLocation(export_arn, described["S3Bucket"], described["ExportManifest"])
        if status == "FAILED":
            code = described.get("FailureCode") or "no failure code"
            raise BootstrapRefused(f"the export failed ({code}): nothing was landed")
        if status != "IN_PROGRESS":
            raise BootstrapRefused("the export's status is not one DynamoDB documents: nothing was landed")
        if monotonic() >= deadline:
            raise BootstrapRefused(
                f"the export is still in progress after {timeout_seconds:.0f} s: nothing was landed; "
                "run again with --export-arn once it has completed"
            )
        progress("export in progress")
        sleep(poll_seconds)

"""A point-in-time export on the local stack that writes what DynamoDB writes, at the time it says.

moto[server]==5.2.5 implements ExportTableToPointInTime roughly: one gzipped file under a random id, no
manifests, the ExportTime neither honoured nor returned, and a thread that reads the table outside the
lock the MotoServer serialises DynamoDB calls with (so an export racing writes sees a torn table).
`install_faithful_export()` replaces moto's handlers of ExportTableToPointInTime, DescribeExport and
ListExports (process-wide, idempotent) with this module's writer:

- the table is snapshotted inside the ExportTableToPointInTime request itself, which the MotoServer
  serves under its DynamoDB lock: every write before the request is in the export, none after. The
  moment of that snapshot is the export's ExportTime (millisecond precision, as DynamoDB reports it);
- a thread then writes the snapshot to moto's S3 in DynamoDB's layout ("DynamoDB table export output
  format", Amazon DynamoDB Developer Guide), under ``<S3Prefix>/AWSDynamoDB/<export id>/``: an empty
  ``_started``, gzipped DynamoDB-JSON data files ``data/<random>.json.gz`` (one ``{"Item": {...}}`` per
  line, items spread over the files by a hash of their partition key, as DynamoDB spreads them by
  partition), ``manifest-files.json`` (one line per data file: itemCount, md5Checksum, etag,
  dataFileS3Key), ``manifest-summary.json`` (version, exportArn, startTime, endTime, tableArn, tableId,
  exportTime, s3Bucket, s3Prefix, s3SseAlgorithm, s3SseKmsKeyId, manifestFilesS3Key, billedSizeBytes,
  itemCount, outputFormat, exportType) and a ``.checksum`` beside each manifest (the hex MD5 of its
  bytes: the guide does not state that file's content). The status is IN_PROGRESS until the summary is
  written, then COMPLETED; a missing bucket makes it FAILED (S3NoSuchBucket), as on AWS;
- the export id is DynamoDB's shape, ``<14 digits>-<8 hex>``, and the ARN ``<table arn>/export/<id>``.

What it refuses (a ValidationException each), where AWS would export: an ExportTime other than now
(this stack cannot read a table's past), ExportFormat ION and ExportType INCREMENTAL_EXPORT (not
written here). Point-in-time recovery must be enabled, as on AWS. A ClientToken seen before returns the
same export. Relies on `moto.dynamodb.responses.DynamoHandler` (`body`, `dynamodb_backend`, the
three handler names), `DynamoDBBackend.tables` / `table_exports`, `Table.table_arn`,
`Table.continuous_backups`, `Table.all_items()`, `Item.to_json`, `Item.hash_key`,
`moto.dynamodb.models.utilities.dynamo_json_dump` and `S3Backend.buckets` / `put_object`.
"""

from __future__ import annotations

__all__ = ["DEFAULT_ITEMS_PER_FILE", "ExportWriter", "install_faithful_export"]

import base64
import gzip
import hashlib
import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.core.responses import ActionResult
from moto.dynamodb.exceptions import (
    ERROR_TYPE_PREFIX,
    MockValidationException,
    PointInTimeRecoveryUnavailable,
    TableNotFoundException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.utilities import dynamo_json_dump
from moto.dynamodb.responses import DynamoHandler
from moto.s3.models import s3_backends
from moto.utilities.utils import get_partition

DEFAULT_ITEMS_PER_FILE = 10_000
# An ExportTime within this of the request's own time counts as "now" (a client's clock and ours).
_NOW_TOLERANCE_SECONDS = 5.0
_MANIFEST_VERSION = "2020-06-30"
_FORMAT = "DYNAMODB_JSON"
_FULL = "FULL_EXPORT"

_installed = threading.Lock()
_state: dict[str, Any] = {"installed": False, "items_per_file": DEFAULT_ITEMS_PER_FILE}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _now_ms() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@dataclass
class ExportWriter:
    """One export: its snapshot (DynamoDB-JSON lines, grouped by data file) and its description."""

    arn: str
    export_id: str
    table: Any  # moto's Table (ListExports reads `.table.table_arn`)
    s3_bucket: str
    s3_prefix: str | None
    bucket_owner: str
    partition: str
    client_token: str | None
    start_time: datetime
    export_time: datetime
    files: list[list[str]]
    export_format: str = _FORMAT
    export_type: str = _FULL
    status: str = "IN_PROGRESS"
    end_time: datetime | None = None
    failure_code: str | None = None
    failure_message: str | None = None
    billed_size_bytes: int = 0
    item_count: int = 0
    _done: threading.Event = field(default_factory=threading.Event)

    @property
    def base_key(self) -> str:
        head = f"{self.s3_prefix.rstrip('/')}/" if self.s3_prefix else ""
        return f"{head}AWSDynamoDB/{self.export_id}"

    @property
    def manifest_key(self) -> str:
        return f"{self.base_key}/manifest-summary.json"

    def wait(self, timeout: float | None = None) -> bool:
        """True once the export has finished (COMPLETED or FAILED)."""
        return self._done.wait(timeout)

    def run(self) -> None:
        try:
            try:
                s3 = s3_backends[self.bucket_owner][self.partition]
                s3.buckets[self.s3_bucket]
            except KeyError:
                self._fail("S3NoSuchBucket", "The specified bucket does not exist")
                return
            self._write(s3)
        except Exception as error:  # the export fails as AWS's does; the server goes on
            self._fail("UNKNOWN", type(error).__name__)
        finally:
            self._done.set()

    def _fail(self, code: str, message: str) -> None:
        self.failure_code, self.failure_message = code, message
        self.end_time = _now_ms()
        self.status = "FAILED"

    def _put(self, s3: Any, key: str, body: bytes) -> None:
        s3.put_object(bucket_name=self.s3_bucket, key_name=key, value=body)

    def _write(self, s3: Any) -> None:
        self._put(s3, f"{self.base_key}/_started", b"")
        entries: list[str] = []
        for lines in self.files:
            text = "".join(line + "\n" for line in lines).encode()
            # mtime=0: the same items give the same bytes (and checksum), as a rewrite of one file should.
            body = gzip.compress(text, mtime=0)
            key = f"{self.base_key}/data/{_random_name()}.json.gz"
            self._put(s3, key, body)
            digest = hashlib.md5(body, usedforsecurity=False)
            entries.append(
                json.dumps(
                    {
                        "itemCount": len(lines),
                        "md5Checksum": base64.b64encode(digest.digest()).decode(),
                        "etag": digest.hexdigest(),
                        "dataFileS3Key": key,
                    },
                    separators=(",", ":"),
                )
            )
            self.item_count += len(lines)
            self.billed_size_bytes += len(text)
        manifest_files = "".join(entry + "\n" for entry in entries).encode()
        files_key = f"{self.base_key}/manifest-files.json"
        self._put(s3, files_key, manifest_files)
        self._put(s3, f"{self.base_key}/manifest-files.checksum", _md5_hex(manifest_files))
        self.end_time = _now_ms()
        summary = json.dumps(
            {
                "version": _MANIFEST_VERSION,
                "exportArn": self.arn,
                "startTime": _iso(self.start_time),
                "endTime": _iso(self.end_time),
                "tableArn": self.table.table_arn,
                "tableId": _table_id(self.table),
                "exportTime": _iso(self.export_time),
                "s3Bucket": self.s3_bucket,
                "s3Prefix": self.s3_prefix,
                "s3SseAlgorithm": "AES256",
                "s3SseKmsKeyId": None,
                "manifestFilesS3Key": files_key,
                "billedSizeBytes": self.billed_size_bytes,
                "itemCount": self.item_count,
                "outputFormat": self.export_format,
                "exportType": self.export_type,
            }
        ).encode()
        self._put(s3, f"{self.base_key}/manifest-summary.json", summary)
        self._put(s3, f"{self.base_key}/manifest-summary.checksum", _md5_hex(summary))
        self.status = "COMPLETED"

    def response(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "ExportArn": self.arn,
            "ExportStatus": self.status,
            "StartTime": self.start_time,
            "ExportManifest": self.manifest_key,
            "TableArn": self.table.table_arn,
            "TableId": _table_id(self.table),
            "ExportTime": self.export_time,
            "S3Bucket": self.s3_bucket,
            "S3BucketOwner": self.bucket_owner,
            "S3SseAlgorithm": "AES256",
            "ExportFormat": self.export_format,
            "ExportType": self.export_type,
            "BilledSizeBytes": self.billed_size_bytes,
            "ItemCount": self.item_count,
        }
        optional = {
            "S3Prefix": self.s3_prefix,
            "ClientToken": self.client_token,
            "EndTime": self.end_time,
            "FailureCode": self.failure_code,
            "FailureMessage": self.failure_message,
        }
        described.update({name: value for name, value in optional.items() if value is not None})
        return described


def _table_id(table: Any) -> str:
    # moto keeps no table id: one derived from the ARN is stable for the table's life, as DynamoDB's is.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, table.table_arn))


def _md5_hex(body: bytes) -> bytes:
    return hashlib.md5(body, usedforsecurity=False).hexdigest().encode()


def _random_name() -> str:
    # DynamoDB's data file names are 26 random lowercase letters and digits.
    return base64.b32encode(secrets.token_bytes(20)).decode().lower()[:26]


def _file_of(item: Any, files: int) -> int:
    hashed = hashlib.md5(repr(item.hash_key.value).encode(), usedforsecurity=False).digest()
    return int.from_bytes(hashed[:4], "big") % files


def _snapshot(table: Any, items_per_file: int) -> list[list[str]]:
    """The table's items as DynamoDB-JSON lines, spread over data files. Runs under the DynamoDB lock."""
    items = list(table.all_items())
    count = max(1, -(-len(items) // items_per_file))
    files: list[list[str]] = [[] for _ in range(count)]
    for item in items:
        files[_file_of(item, count)].append(dynamo_json_dump(item.to_json(root_attr_name="Item")))
    return files


def _exports(backend: DynamoDBBackend) -> dict[str, Any]:
    exports: dict[str, Any] = backend.table_exports
    return exports


def _start(response: DynamoHandler) -> tuple[ExportWriter, bool]:
    """The export the request asks for, and whether it is new (its writer not started yet)."""
    body = response.body
    backend = response.dynamodb_backend
    token = body.get("ClientToken")
    if token:
        for existing in _exports(backend).values():
            if isinstance(existing, ExportWriter) and existing.client_token == token:
                return existing, False
    table_arn = body["TableArn"]
    table = next((t for t in backend.tables.values() if t.table_arn == table_arn), None)
    if table is None:
        raise TableNotFoundException(name=table_arn)
    recovery = table.continuous_backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"]
    if recovery != "ENABLED":
        raise PointInTimeRecoveryUnavailable(name=table_arn.split("/")[-1])
    export_format = body.get("ExportFormat", _FORMAT)
    export_type = body.get("ExportType", _FULL)
    if export_format != _FORMAT:
        raise MockValidationException("the local stack writes DYNAMODB_JSON exports only")
    if export_type != _FULL:
        raise MockValidationException("the local stack writes FULL_EXPORT exports only")
    start = _now_ms()
    asked = body.get("ExportTime")
    asked_seconds = asked.timestamp() if isinstance(asked, datetime) else asked
    if asked is not None and abs(float(asked_seconds) - start.timestamp()) > _NOW_TOLERANCE_SECONDS:
        raise MockValidationException("the local stack exports a table as it is now: omit ExportTime")
    # The request holds the MotoServer's DynamoDB lock: this snapshot is the table at one instant.
    files = _snapshot(table, int(_state["items_per_file"]))
    export_time = _now_ms()
    export_id = f"{int(time.time() * 1000):014d}-{secrets.token_hex(4)}"
    writer = ExportWriter(
        arn=f"{table_arn}/export/{export_id}",
        export_id=export_id,
        table=table,
        s3_bucket=body["S3Bucket"],
        s3_prefix=body.get("S3Prefix") or None,
        bucket_owner=body.get("S3BucketOwner") or backend.account_id,
        partition=get_partition(backend.region_name),
        client_token=token or None,
        start_time=start,
        export_time=export_time,
        files=files,
    )
    _exports(backend)[writer.arn] = writer
    return writer, True


def _export_table_to_point_in_time(self: DynamoHandler) -> ActionResult:
    writer, new = _start(self)
    described = writer.response()  # before the writer runs: a new export is IN_PROGRESS, as on AWS
    if new:
        threading.Thread(target=writer.run, name="dynamodb-export", daemon=True).start()
    return ActionResult({"ExportDescription": described})


def _describe_export(self: DynamoHandler) -> ActionResult:
    found = _exports(self.dynamodb_backend).get(self.body["ExportArn"])
    if found is None:
        raise _ExportNotFound()
    return ActionResult({"ExportDescription": found.response()})


def _list_exports(self: DynamoHandler) -> ActionResult:
    table_arn = self.body.get("TableArn")
    summaries = [
        {"ExportArn": e.arn, "ExportStatus": e.status, "ExportType": e.export_type}
        for e in _exports(self.dynamodb_backend).values()
        if table_arn is None or e.table.table_arn == table_arn
    ]
    return ActionResult({"ExportSummaries": summaries})


class _ExportNotFound(JsonRESTError):
    def __init__(self) -> None:
        super().__init__(ERROR_TYPE_PREFIX + "ExportNotFoundException", "Export not found")


def install_faithful_export(items_per_file: int | None = None) -> None:
    """Serve ExportTableToPointInTime, DescribeExport and ListExports with this module's writer
    (process-wide, idempotent). `items_per_file`, when given, sets how many items a data file holds
    at most from now on (default `DEFAULT_ITEMS_PER_FILE`)."""
    with _installed:
        if items_per_file is not None:
            if items_per_file < 1:
                raise ValueError("items_per_file must be at least 1")
            _state["items_per_file"] = items_per_file
        if _state["installed"]:
            return
        DynamoHandler.export_table_to_point_in_time = _export_table_to_point_in_time  # type: ignore[method-assign]
        DynamoHandler.describe_export = _describe_export  # type: ignore[method-assign]
        DynamoHandler.list_exports = _list_exports  # type: ignore[method-assign]
        _state["installed"] = True

"""An export's manifests read and checked: DynamoDB's layout under `<prefix>/AWSDynamoDB/<export id>/`
("DynamoDB table export output format", Amazon DynamoDB Developer Guide).

`manifest-summary.json` says which table, when (exportTime, T), in which format and of which type, and
names `manifest-files.json`, one JSON line per data file (itemCount, md5Checksum, etag, dataFileS3Key).
Everything that makes an export unusable is found here, before anything is landed: another table's
export, an ION or an incremental export, a summary that is missing (unfinished, failed, or not an
export), an unknown manifest version, a data file listed but absent, counts that do not add up.
"""

from __future__ import annotations

__all__ = ["DataFile", "ExportManifest", "S3Reader", "read_data_file", "read_manifest", "split_s3_uri"]

import base64
import gzip
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from analytics.bootstrap._errors import BootstrapRefused
from schema.aws_errors import converted

_VERSION = "2020-06-30"
_FORMAT = "DYNAMODB_JSON"
_FULL = "FULL_EXPORT"
_SUMMARY = "manifest-summary.json"
_MISSING = frozenset({"404", "NoSuchKey", "NotFound"})


class S3Reader(Protocol):
    def get_object(self, **kwargs: Any) -> dict[str, Any]: ...
    def head_object(self, **kwargs: Any) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class DataFile:
    """One data file of an export: its key, its position in the manifest, its item count and MD5."""

    key: str
    index: int
    item_count: int
    md5_checksum: str | None

    @property
    def name(self) -> str:
        """The file's name (`<random>.json.gz`): its "shard" in the lake, with the export's ARN."""
        return self.key.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class ExportManifest:
    export_arn: str
    table_arn: str
    exported_at: datetime  # T, aware UTC
    bucket: str
    item_count: int
    files: tuple[DataFile, ...]

    @property
    def export_id(self) -> str:
        return self.export_arn.rsplit("/", 1)[-1]


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key...` to (bucket, key); a prefix ending in the export's folder names its summary."""
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise BootstrapRefused("an export location is s3://bucket/<prefix>/AWSDynamoDB/<export id>/")
    bucket, key = uri[5:].split("/", 1)
    if not key.endswith(".json"):
        key = f"{key.rstrip('/')}/{_SUMMARY}"
    if not bucket or (not key.endswith(f"/{_SUMMARY}") and key != _SUMMARY):
        raise BootstrapRefused("an export location names its manifest-summary.json or the folder holding it")
    return bucket, key


def _read(s3: S3Reader, bucket: str, key: str, what: str) -> bytes | None:
    with converted(f"S3 GetObject ({what})", tolerate=_MISSING) as missing:
        body: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return None if missing else body


def _exists(s3: S3Reader, bucket: str, key: str) -> bool:
    with converted("S3 HeadObject (export data file)", tolerate=_MISSING) as missing:
        s3.head_object(Bucket=bucket, Key=key)
    return not missing


def _time(value: Any) -> datetime:
    if type(value) is not str:
        raise BootstrapRefused("the export's manifest has no exportTime")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BootstrapRefused("the export's manifest has an exportTime that is not a time") from None
    if moment.tzinfo is None:
        raise BootstrapRefused("the export's manifest has an exportTime without a zone")
    return moment.astimezone(UTC)


def _object(body: bytes, what: str) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BootstrapRefused(f"the export's {what} is not JSON") from None
    if type(parsed) is not dict:
        raise BootstrapRefused(f"the export's {what} is not a JSON object")
    return parsed


def _files(body: bytes, bucket: str, s3: S3Reader, landed: set[str]) -> tuple[DataFile, ...]:
    files: list[DataFile] = []
    lines = [line for line in body.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        entry = _object(line, f"manifest-files.json line {index + 1}")
        key, count, md5 = entry.get("dataFileS3Key"), entry.get("itemCount"), entry.get("md5Checksum")
        if type(key) is not str or type(count) is not int or count < 0:
            raise BootstrapRefused(f"manifest-files.json line {index + 1} has no dataFileS3Key or itemCount")
        files.append(DataFile(key, index, count, md5 if type(md5) is str else None))
    for data_file in files:
        # A file the lake holds whole may be gone: the bootstrap deletes the data files once landed.
        if data_file.name not in landed and not _exists(s3, bucket, data_file.key):
            raise BootstrapRefused(
                f"the export's manifest names a data file that is missing (file {data_file.index + 1} of "
                f"{len(files)}): nothing was landed"
            )
    return tuple(files)


def read_manifest(
    s3: S3Reader,
    bucket: str,
    summary_key: str,
    *,
    table_arn: str,
    landed: Callable[[str], set[str]] | None = None,
) -> ExportManifest:
    """The export whose summary is at `summary_key`, checked to be a finished full DynamoDB-JSON export
    of `table_arn` whose every data file is there (`BootstrapRefused` otherwise). `landed` names, for
    the export's ARN, the data files the lake already holds (`landed_files`): those need not be there
    any more (a rerun after the bootstrap deleted them)."""
    body = _read(s3, bucket, summary_key, "export manifest")
    if body is None:
        raise BootstrapRefused(
            "the export has no manifest-summary.json: it is unfinished or failed, or the location is not "
            "an export's folder"
        )
    summary = _object(body, "manifest-summary.json")
    if summary.get("version") != _VERSION:
        raise BootstrapRefused(f"the export's manifest is not of version {_VERSION}")
    if summary.get("tableArn") != table_arn:
        raise BootstrapRefused("the export is of another table than the configured one")
    if summary.get("outputFormat", _FORMAT) != _FORMAT:
        raise BootstrapRefused(
            "the export is not DYNAMODB_JSON (an ION export?): export again as DYNAMODB_JSON"
        )
    if summary.get("exportType", _FULL) != _FULL:
        raise BootstrapRefused("the export is incremental: a bootstrap needs a FULL_EXPORT")
    arn, files_key, count = (
        summary.get("exportArn"),
        summary.get("manifestFilesS3Key"),
        summary.get("itemCount"),
    )
    if type(arn) is not str or "/export/" not in arn or type(files_key) is not str or type(count) is not int:
        raise BootstrapRefused("the export's manifest lacks exportArn, manifestFilesS3Key or itemCount")
    exported_at = _time(summary.get("exportTime"))
    files_body = _read(s3, bucket, files_key, "export file list")
    if files_body is None:
        raise BootstrapRefused("the export's manifest-files.json is missing: nothing was landed")
    files = _files(files_body, bucket, s3, landed(arn) if landed is not None else set())
    if sum(f.item_count for f in files) != count:
        raise BootstrapRefused("the export's data files do not add up to its itemCount: nothing was landed")
    return ExportManifest(arn, table_arn, exported_at, bucket, count, files)


def read_data_file(s3: S3Reader, bucket: str, data_file: DataFile) -> list[bytes]:
    """The lines of one data file, its MD5 checked against the manifest's."""
    body = _read(s3, bucket, data_file.key, "export data file")
    if body is None:
        raise BootstrapRefused(f"export data file {data_file.index + 1} disappeared while landing")
    if data_file.md5_checksum is not None:
        digest = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()
        if digest != data_file.md5_checksum:
            raise BootstrapRefused(
                f"export data file {data_file.index + 1} differs from its manifest checksum"
            )
    try:
        text = gzip.decompress(body)
    except (OSError, EOFError):
        raise BootstrapRefused(f"export data file {data_file.index + 1} is not gzip") from None
    lines = [line for line in text.split(b"\n") if line.strip()]
    if len(lines) != data_file.item_count:
        raise BootstrapRefused(
            f"export data file {data_file.index + 1} holds another count than its manifest"
        )
    return lines

"""`entitlements lake bootstrap` on the local stack: it lands an export, refuses a bad one in one line
with nothing landed, and a rerun after kill -9 lands each item once."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from typer.testing import CliRunner

from analytics.lake import CHANGES, open_lake
from entitlements.cli import app as cli
from schema.table_writes import entitlement_row
from tests.analytics.lake.test_bootstrap import NOW, Stack, small_files, stack, write_history

__all__ = ["small_files", "stack"]  # fixtures shared with the bootstrap's library tests


def _env(stack: Stack, endpoint: str, tmp_path: Path) -> dict[str, str]:
    return {
        "ENTITLEMENTS_AWS__ENDPOINT_URL": endpoint,
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": "testing",
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
        "ENTITLEMENTS_CONSUMER__TABLE_NAME": stack.table_name,
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path),
        "ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake"),
        "ENTITLEMENTS_BOOTSTRAP__EXPORT_BUCKET": stack.bucket,
        "ENTITLEMENTS_BOOTSTRAP__POLL_SECONDS": "0.05",
    }


def _rows(tmp_path: Path, source_arn: str | None = None) -> tuple[int, int]:
    """(rows, distinct identities) in the changes table (of one export when given)."""
    try:
        table = DeltaTable(open_lake(str(tmp_path / "lake")).table_uri(CHANGES)).to_pyarrow_table(
            columns=["stream_arn", "shard_id", "sequence_number"]
        )
    except TableNotFoundError:
        return 0, 0
    rows = [
        (a, s, n)
        for a, s, n in zip(*(table[c].to_pylist() for c in table.column_names), strict=True)
        if source_arn is None or a == source_arn
    ]
    return len(rows), len(set(rows))


def _ready(stack: Stack, users: int = 20) -> None:
    write_history(stack, users)
    stack.enable_stream()
    stack.enable_recovery()


def _invoke(stack: Stack, moto_endpoint: str, tmp_path: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["lake", "bootstrap", *args], env=_env(stack, moto_endpoint, tmp_path))


def test_it_starts_an_export_waits_and_lands_it(stack: Stack, moto_endpoint: str, tmp_path: Path) -> None:
    _ready(stack)
    result = _invoke(stack, moto_endpoint, tmp_path)
    assert result.exit_code == 0, result.output
    assert "bootstrap: point-in-time export started" in result.stderr
    assert "bootstrap: export completed: 25 items" in result.stderr
    assert "25 items landed" in result.stdout
    assert _rows(tmp_path) == (25, 25)


def test_it_lands_an_export_given_by_its_arn(stack: Stack, moto_endpoint: str, tmp_path: Path) -> None:
    _ready(stack)
    manifest = stack.export()
    result = _invoke(stack, moto_endpoint, tmp_path, "--export-arn", manifest.export_arn)
    assert result.exit_code == 0, result.output
    assert _rows(tmp_path, manifest.export_arn) == (25, 25)


def _export_folder(stack: Stack) -> tuple[str, str]:
    manifest = stack.export()
    prefix = f"boot/AWSDynamoDB/{manifest.export_id}"
    return manifest.export_arn, prefix


def _refused(result: Any, tmp_path: Path, words: str) -> None:
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("entitlements:")]
    assert len(lines) == 1 and words in lines[0], result.stderr
    assert "USER#" not in result.stderr
    assert _rows(tmp_path) == (0, 0)


def test_an_export_given_by_its_folder_is_landed(stack: Stack, moto_endpoint: str, tmp_path: Path) -> None:
    _ready(stack)
    _, prefix = _export_folder(stack)
    result = _invoke(stack, moto_endpoint, tmp_path, "--export", f"s3://{stack.bucket}/{prefix}/")
    assert result.exit_code == 0, result.output
    assert _rows(tmp_path) == (25, 25)


def test_another_tables_export_is_refused(
    stack: Stack, moto_endpoint: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _ready(stack)
    _, prefix = _export_folder(stack)
    stack.table_name = stack.table_name + "-other"
    stack.dynamodb.create_table(
        TableName=stack.table_name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    result = _invoke(stack, moto_endpoint, tmp_path, "--export", f"s3://{stack.bucket}/{prefix}/")
    _refused(result, tmp_path, "another table")


def _rewrite_summary(stack: Stack, prefix: str, **changes: Any) -> None:
    key = f"{prefix}/manifest-summary.json"
    summary = json.loads(stack.s3.get_object(Bucket=stack.bucket, Key=key)["Body"].read())
    summary.update(changes)
    stack.s3.put_object(Bucket=stack.bucket, Key=key, Body=json.dumps(summary).encode())


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"outputFormat": "ION"}, "not DYNAMODB_JSON"),
        ({"exportType": "INCREMENTAL_EXPORT"}, "incremental"),
    ],
)
def test_an_ion_or_incremental_export_is_refused(
    stack: Stack, moto_endpoint: str, tmp_path: Path, changes: dict[str, str], words: str
) -> None:
    _ready(stack)
    _, prefix = _export_folder(stack)
    _rewrite_summary(stack, prefix, **changes)
    result = _invoke(stack, moto_endpoint, tmp_path, "--export", f"s3://{stack.bucket}/{prefix}/")
    _refused(result, tmp_path, words)


def test_a_manifest_naming_a_missing_file_is_refused(
    stack: Stack, moto_endpoint: str, tmp_path: Path, small_files: None
) -> None:
    _ready(stack)
    _, prefix = _export_folder(stack)
    listed = stack.s3.get_object(Bucket=stack.bucket, Key=f"{prefix}/manifest-files.json")["Body"].read()
    last = json.loads(listed.splitlines()[-1])["dataFileS3Key"]
    stack.s3.delete_object(Bucket=stack.bucket, Key=last)
    result = _invoke(stack, moto_endpoint, tmp_path, "--export", f"s3://{stack.bucket}/{prefix}/")
    _refused(result, tmp_path, "missing")


def test_an_unfinished_export_is_refused(stack: Stack, moto_endpoint: str, tmp_path: Path) -> None:
    _ready(stack)
    _, prefix = _export_folder(stack)
    stack.s3.delete_object(Bucket=stack.bucket, Key=f"{prefix}/manifest-summary.json")
    result = _invoke(stack, moto_endpoint, tmp_path, "--export", f"s3://{stack.bucket}/{prefix}/")
    _refused(result, tmp_path, "unfinished")


def test_a_failed_export_is_refused(stack: Stack, moto_endpoint: str, tmp_path: Path) -> None:
    _ready(stack)
    started = stack.dynamodb.export_table_to_point_in_time(
        TableArn=stack.table_arn, S3Bucket="no-such-bucket-anywhere", S3Prefix="x"
    )["ExportDescription"]
    result = _invoke(stack, moto_endpoint, tmp_path, "--export-arn", started["ExportArn"])
    _refused(result, tmp_path, "failed (S3NoSuchBucket)")


def test_a_line_the_decoder_refuses_names_its_file_and_line_only(
    stack: Stack, moto_endpoint: str, tmp_path: Path
) -> None:
    _ready(stack, users=1)
    _, prefix = _export_folder(stack)
    listed = json.loads(
        stack.s3.get_object(Bucket=stack.bucket, Key=f"{prefix}/manifest-files.json")["Body"].read()
    )
    body = gzip.compress(b'{"Item": {"pk": {"S": "USER#x"}, "sk": {"N": "1"}}}\n', mtime=0)
    stack.s3.put_object(Bucket=stack.bucket, Key=listed["dataFileS3Key"], Body=body)
    files = dict(listed, itemCount=1, md5Checksum=None)
    stack.s3.put_object(
        Bucket=stack.bucket, Key=f"{prefix}/manifest-files.json", Body=json.dumps(files).encode()
    )
    _rewrite_summary(stack, prefix, itemCount=1)
    result = _invoke(stack, moto_endpoint, tmp_path, "--export", f"s3://{stack.bucket}/{prefix}/")
    _refused(result, tmp_path, "data file 1, line 1: Item has no string pk and sk")


def test_a_rerun_after_kill_9_lands_each_exported_item_once(
    stack: Stack, moto_endpoint: str, tmp_path: Path, small_files: None
) -> None:
    write_history(stack, 20)
    for index in range(200):
        stack.put(entitlement_row(f"m{index}", f"c{index}", now=NOW))
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    assert len(manifest.files) >= 20
    env = {**os.environ, **_env(stack, moto_endpoint, tmp_path)}
    script = str(Path(sys.executable).with_name("entitlements"))
    command = [script, "lake", "bootstrap", "--export-arn", manifest.export_arn]
    child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert child.stderr is not None
    deadline = time.monotonic() + 120
    for raw in child.stderr:  # killed once a few files are in, while later ones are being landed
        if raw.startswith(b"bootstrap: file 3/") or time.monotonic() > deadline:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    landed, _ = _rows(tmp_path, manifest.export_arn)
    assert 0 < landed < manifest.item_count  # killed part-way
    rerun = subprocess.run(command, env=env, capture_output=True, check=False)
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert b"landed by an earlier run, skipped" in rerun.stderr
    assert _rows(tmp_path, manifest.export_arn) == (manifest.item_count, manifest.item_count)


def test_without_an_export_it_scans_and_states_the_caveat(
    stack: Stack, moto_endpoint: str, tmp_path: Path
) -> None:
    write_history(stack, 20)
    stack.enable_stream()  # no point-in-time recovery: an export could not be taken
    result = _invoke(stack, moto_endpoint, tmp_path, "--scan")
    assert result.exit_code == 0, result.output
    assert "a scan is not a snapshot" in result.stderr
    assert "bootstrap: segment " in result.stderr
    assert _rows(tmp_path) == (25, 25)


def test_an_as_of_before_the_bootstrap_says_the_history_starts_there(
    stack: Stack, moto_endpoint: str, tmp_path: Path
) -> None:
    _ready(stack)
    manifest = stack.export()
    landed = _invoke(stack, moto_endpoint, tmp_path, "--export-arn", manifest.export_arn)
    assert landed.exit_code == 0, landed.output
    starts = manifest.exported_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert f"the lake's history starts at {manifest.exported_at.isoformat()}" in landed.stdout
    env = _env(stack, moto_endpoint, tmp_path)
    before = (manifest.exported_at - timedelta(seconds=1)).isoformat()
    query = ["sql", "SELECT count(*) FROM current_items", "--as-of", before]
    refused = CliRunner().invoke(cli, query, env=env)
    assert refused.exit_code == 2
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, refused.stderr
    assert f"holds the table's history from {starts} on (bootstrapped then)" in lines[0]
    at = CliRunner().invoke(cli, [*query[:3], manifest.exported_at.isoformat()], env=env)
    assert at.exit_code == 0, at.output
    assert "25" in at.stdout


def test_a_rerun_after_kill_9_during_a_scan_lands_each_item_once(
    stack: Stack, moto_endpoint: str, tmp_path: Path
) -> None:
    write_history(stack, 20)
    for index in range(200):
        stack.put(entitlement_row(f"m{index}", f"c{index}", now=NOW))
    stack.enable_stream()  # no point-in-time recovery: the scan is the way in
    items = len(stack.scan())
    env = {
        **os.environ,
        **_env(stack, moto_endpoint, tmp_path),
        "ENTITLEMENTS_BOOTSTRAP__SCAN_SEGMENTS": "12",
        "ENTITLEMENTS_BOOTSTRAP__SCAN_PAGE_ITEMS": "10",
    }
    script = str(Path(sys.executable).with_name("entitlements"))
    command = [script, "lake", "bootstrap", "--scan"]
    child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert child.stderr is not None
    deadline = time.monotonic() + 120
    for raw in child.stderr:  # killed once a segment is in, while the others are being landed
        if raw.startswith(b"bootstrap: segment ") or time.monotonic() > deadline:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    landed, _ = _rows(tmp_path)
    assert 0 < landed < items  # killed part-way
    rerun = subprocess.run(command, env=env, capture_output=True, check=False)
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert b"bootstrap: resuming the scan begun at " in rerun.stderr
    assert _rows(tmp_path) == (items, items)


def _data_files(stack: Stack) -> list[str]:
    listed = stack.s3.list_objects_v2(Bucket=stack.bucket).get("Contents", [])
    return [str(entry["Key"]) for entry in listed if str(entry["Key"]).endswith(".json.gz")]


def test_the_exports_data_files_are_deleted_once_landed_and_a_rerun_lands_nothing(
    stack: Stack, moto_endpoint: str, tmp_path: Path
) -> None:
    _ready(stack)
    manifest = stack.export()
    first = _invoke(stack, moto_endpoint, tmp_path, "--export-arn", manifest.export_arn)
    assert first.exit_code == 0, first.output
    assert "data files were deleted from S3" in first.stdout
    assert _data_files(stack) == []
    rerun = _invoke(stack, moto_endpoint, tmp_path, "--export-arn", manifest.export_arn)
    assert rerun.exit_code == 0, rerun.output
    assert "0 items landed" in rerun.stdout
    assert _rows(tmp_path, manifest.export_arn) == (25, 25)


def test_keep_export_leaves_the_data_files(stack: Stack, moto_endpoint: str, tmp_path: Path) -> None:
    _ready(stack)
    manifest = stack.export()
    result = _invoke(stack, moto_endpoint, tmp_path, "--export-arn", manifest.export_arn, "--keep-export")
    assert result.exit_code == 0, result.output
    assert len(_data_files(stack)) == len(manifest.files)

"""A table with history, bootstrapped from a point-in-time export on the local stack, then consumed: the
lake's state equals the table's (analytics.bootstrap).

Consuming here replays the stream through the consumer's landing path without the JVM: every record from
the trim horizon decoded by `pipeline.decode.decode_stream_record` and added to a `LakeHandler`, as the
record processor's lake handler does (the daemon itself is not started: these are not `kcl` tests).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pyarrow.compute as pc
import pytest
from botocore.exceptions import ClientError
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from analytics.audits import render_report, run_audits
from analytics.audits._checks import Scope
from analytics.audits._runner import history_note
from analytics.bootstrap import (
    BootstrapRefused,
    BootstrapReport,
    ExportManifest,
    StreamGap,
    bootstrap_export,
    landed_files,
    read_manifest,
    start_export,
    wait_for_export,
)
from analytics.lake import CHANGES, Lake, LakeHandler, open_lake
from analytics.lake.history_start import HistoryStartsLater, history_start
from analytics.lake.purge import purge_users
from analytics.lake.views import connect
from config import BootstrapSettings, LakeSettings
from devstack.export import DEFAULT_ITEMS_PER_FILE, install_faithful_export
from devstack.streams import read_stream_by_shard
from pipeline.decode import decode_export_item, decode_stream_record
from pipeline.tables import TABLE_ATTRIBUTE_DEFINITIONS, TABLE_KEY_SCHEMA
from schema.table import EntitlementStatus, cancellation_key, entitlement_key
from schema.table_writes import cancellation_record, entitlement_row, low_level, set_status
from tests.support.dynamodb import client, unique_table_name

NOW = datetime(2026, 11, 1, tzinfo=UTC)
_KEY_NAMES = {k["AttributeName"] for k in TABLE_KEY_SCHEMA}


@dataclass
class Stack:
    dynamodb: Any
    s3: Any
    streams: Any
    table_name: str
    table_arn: str
    bucket: str
    stream_arn: str = ""

    def put(self, item: dict[str, Any]) -> None:
        self.dynamodb.put_item(TableName=self.table_name, Item=item)

    def delete(self, key: dict[str, str]) -> None:
        self.dynamodb.delete_item(TableName=self.table_name, Key=low_level(key))

    def set_status(self, user: str, account: str, status: EntitlementStatus) -> None:
        self.dynamodb.update_item(
            **set_status(self.table_name, entitlement_key(user, account), to=status, require=None, now=NOW)
        )

    def enable_stream(self) -> None:
        self.dynamodb.update_table(
            TableName=self.table_name,
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        self.stream_arn = self.dynamodb.describe_table(TableName=self.table_name)["Table"]["LatestStreamArn"]

    def enable_recovery(self) -> None:
        self.dynamodb.update_continuous_backups(
            TableName=self.table_name,
            PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
        )

    def scan(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        arguments: dict[str, Any] = {"TableName": self.table_name, "ConsistentRead": True}
        while True:
            page = self.dynamodb.scan(**arguments)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def export(self) -> ExportManifest:
        arn = start_export(self.dynamodb, table_arn=self.table_arn, bucket=self.bucket, prefix="boot")
        return self.manifest_of(arn)

    def manifest_of(self, arn: str) -> ExportManifest:
        where = wait_for_export(self.dynamodb, arn, poll_seconds=0.02, timeout_seconds=60, progress=_quiet)
        return read_manifest(self.s3, where.bucket, where.summary_key, table_arn=self.table_arn)

    def bootstrap(self, manifest: ExportManifest, lake: Lake, **overrides: Any) -> BootstrapReport:
        arguments: dict[str, Any] = {
            "s3": self.s3,
            "streams": self.streams,
            "stream_arn": self.stream_arn,
            "lake": lake,
            "lake_settings": LakeSettings(),
            "allow_list": None,
            "settings": BootstrapSettings(),
            "now": datetime.now(UTC),
            "accept_gap": False,
            "progress": _quiet,
        }
        arguments.update(overrides)
        return bootstrap_export(manifest, **arguments)

    def consume(self, lake: Lake) -> int:
        handler = LakeHandler(lake)
        count = 0
        for shard_id, record in read_stream_by_shard(self.streams, self.stream_arn):
            handler.add(decode_stream_record(record, stream_arn=self.stream_arn, shard_id=shard_id))
            count += 1
        handler.flush()
        return count


def _quiet(line: str) -> None:
    return None


@pytest.fixture
def stack(moto_endpoint: str) -> Stack:
    """A table made without its stream (enabled later by each test) and an export bucket."""
    dynamodb = client(moto_endpoint, "dynamodb")
    s3 = client(moto_endpoint, "s3")
    name = unique_table_name("boot")
    dynamodb.create_table(
        TableName=name,
        KeySchema=[dict(k) for k in TABLE_KEY_SCHEMA],
        AttributeDefinitions=[
            dict(a) for a in TABLE_ATTRIBUTE_DEFINITIONS if a["AttributeName"] in _KEY_NAMES
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    bucket = f"boot-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    arn = dynamodb.describe_table(TableName=name)["Table"]["TableArn"]
    return Stack(dynamodb, s3, client(moto_endpoint, "dynamodbstreams"), name, arn, bucket)


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return open_lake(str(tmp_path / "lake"))


@pytest.fixture
def small_files() -> Iterator[None]:
    install_faithful_export(items_per_file=7)
    yield
    install_faithful_export(items_per_file=DEFAULT_ITEMS_PER_FILE)


def write_history(stack: Stack, users: int) -> None:
    """Rows of every kind the service writes, a user with two Active rows (a fault the audit finds) and
    cancellations with their cleanup records."""
    for index in range(users):
        stack.put(entitlement_row(f"u{index}", f"a{index}", now=NOW))
    for index in range(0, users, 5):
        stack.set_status(f"u{index}", f"a{index}", EntitlementStatus.CANCELLED)
        stack.put(cancellation_record(f"u{index}", f"a{index}", ttl=1_800_000_000, now=NOW))
    stack.put(entitlement_row("u1", "a1-second", now=NOW))


def _state(lake: Lake) -> set[tuple[Any, ...]]:
    con = connect(lake)
    try:
        rows = con.sql(
            "SELECT pk, sk, user_id, status, array_account_id, ttl, item_created_at, item_updated_at "
            "FROM current_items"
        ).fetchall()
    finally:
        con.close()
    return set(rows)


def _now_audits(lake: Lake) -> dict[str, list[tuple[Any, ...]]]:
    report = run_audits(lake, from_snapshot=False)
    found: dict[str, list[tuple[Any, ...]]] = {}
    for check in report.results:
        if check.scope is not Scope.NOW:
            continue
        keep = [c for c in check.columns if c not in {"changed_at", "event_id", "valid_from"}]
        found[check.name] = sorted(tuple(str(row.get(c)) for c in keep) for row in check.rows)
    return found


def lake_of_the_table(stack: Stack, root: Path) -> Lake:
    """The table itself as a lake: a direct Scan, each item landed as it is (the reference)."""
    reference = open_lake(str(root))
    handler = LakeHandler(reference)
    for index, item in enumerate(stack.scan()):
        handler.add(
            decode_export_item(
                orjson.dumps({"Item": item}),  # no binary here (boto3 gives it as bytes)
                export_arn=f"{stack.table_arn}/export/00000000000000-scan0000",
                data_file="scan",
                sequence_number=str(index + 1),
                exported_at=datetime.now(UTC),
                event_id=f"scan/{index}",
            )
        )
    handler.flush()
    return reference


def _landed_identities(lake: Lake, source_arn: str) -> tuple[int, int]:
    table = DeltaTable(lake.table_uri(CHANGES)).to_pyarrow_table(
        columns=["stream_arn", "shard_id", "sequence_number"]
    )
    rows = table.filter(pc.equal(table["stream_arn"], source_arn))
    identities = {
        (s, n) for s, n in zip(rows["shard_id"].to_pylist(), rows["sequence_number"].to_pylist(), strict=True)
    }
    return rows.num_rows, len(identities)


def test_history_from_before_the_stream_reaches_the_lake_and_equals_the_table(
    stack: Stack, lake: Lake, tmp_path: Path, small_files: None
) -> None:
    write_history(stack, 40)
    stack.enable_stream()
    # Changes the stream holds from before the export: they are in the export too.
    stack.set_status("u2", "a2", EntitlementStatus.CANCELLED)
    stack.put(cancellation_record("u2", "a2", ttl=1_800_000_000, now=NOW))
    stack.delete(cancellation_key("u5"))  # a reactivation: the record goes, the row comes back
    stack.set_status("u5", "a5", EntitlementStatus.ACTIVE)
    stack.enable_recovery()

    stop = threading.Event()
    writes = {"count": 0}

    def race() -> None:
        rng = random.Random(7)
        # Never u1, the planted duplicate: how many writes race the export depends on the machine's
        # speed, and one setting a1 Cancelled made the fault vanish (the fresh-clone run on d6106e0).
        raced = [user for user in range(40) if user != 1]
        while not stop.is_set():
            user = rng.choice(raced)
            choice = rng.random()
            if choice < 0.4:
                stack.set_status(f"u{user}", f"a{user}", rng.choice(list(EntitlementStatus)))
            elif choice < 0.7:
                stack.put(entitlement_row(f"n{writes['count']}", f"b{writes['count']}", now=NOW))
            else:
                stack.delete(cancellation_key(f"u{user}"))
            writes["count"] += 1

    racer = threading.Thread(target=race)
    racer.start()
    try:
        time.sleep(0.2)
        manifest = stack.export()  # the writes go on while the export is taken and written
        time.sleep(0.2)
    finally:
        stop.set()
        racer.join()
    assert writes["count"] > 0
    assert len(manifest.files) > 1

    report = stack.bootstrap(manifest, lake)
    assert report.items_landed == manifest.item_count
    stack.consume(lake)

    table_lake = lake_of_the_table(stack, tmp_path / "table")
    assert _state(lake) == _state(table_lake)
    audits = _now_audits(lake)
    assert audits == _now_audits(table_lake)
    assert audits["duplicate_active_rows"]  # the planted fault from before the stream is seen


def test_a_rerun_lands_each_exported_item_once(stack: Stack, lake: Lake, small_files: None) -> None:
    write_history(stack, 30)
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    first = stack.bootstrap(manifest, lake)
    second = stack.bootstrap(manifest, lake)
    assert first.items_landed == manifest.item_count and first.files_landed == len(manifest.files)
    assert second.items_landed == 0 and second.files_skipped == len(manifest.files)
    assert _landed_identities(lake, manifest.export_arn) == (manifest.item_count, manifest.item_count)


def test_an_exported_item_sits_after_its_changes_before_the_export_and_before_those_after(
    stack: Stack, lake: Lake
) -> None:
    stack.put(entitlement_row("u1", "a1", now=NOW))
    stack.enable_stream()
    stack.set_status("u1", "a1", EntitlementStatus.CANCELLED)
    time.sleep(1.1)  # beyond the stream time's precision: this change is before T
    stack.enable_recovery()
    manifest = stack.export()
    stack.set_status("u1", "a1", EntitlementStatus.REMOVED)
    stack.bootstrap(manifest, lake)
    stack.consume(lake)
    con = connect(lake)
    try:
        history = con.sql(
            "SELECT change_kind, status FROM item_versions WHERE pk = 'USER#u1' "
            "ORDER BY sequence_key, stream_arn, shard_id"
        ).fetchall()
        current = con.sql("SELECT status FROM current_items WHERE pk = 'USER#u1'").fetchall()
    finally:
        con.close()
    assert history == [("MODIFY", "Cancelled"), ("EXPORT", "Cancelled"), ("MODIFY", "Removed")]
    assert current == [("Removed",)]


def test_an_item_changed_only_after_the_export_takes_the_streams_state(stack: Stack, lake: Lake) -> None:
    stack.put(entitlement_row("u1", "a1", now=NOW))
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    stack.set_status("u1", "a1", EntitlementStatus.CANCELLED)
    stack.bootstrap(manifest, lake)
    stack.consume(lake)
    con = connect(lake)
    try:
        assert con.sql("SELECT status FROM current_items").fetchall() == [("Cancelled",)]
    finally:
        con.close()


def test_exported_rows_are_at_the_export_time(stack: Stack, lake: Lake) -> None:
    stack.put(entitlement_row("u1", "a1", now=NOW))
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    stack.bootstrap(manifest, lake)
    con = connect(lake)
    try:
        (changed_at,) = con.sql("SELECT changed_at FROM current_items").fetchone() or (None,)
    finally:
        con.close()
    assert changed_at == manifest.exported_at


def test_the_bootstrap_stops_when_the_stream_was_enabled_after_the_export(stack: Stack, lake: Lake) -> None:
    stack.put(entitlement_row("u1", "a1", now=NOW))
    stack.enable_recovery()
    manifest = stack.export()
    time.sleep(1.1)
    stack.enable_stream()
    with pytest.raises(StreamGap) as stopped:
        stack.bootstrap(manifest, lake)
    assert stopped.value.gap > timedelta(0)
    assert _landed_identities_or_none(lake) is None


def _landed_identities_or_none(lake: Lake) -> int | None:
    try:
        return int(DeltaTable(lake.table_uri(CHANGES)).to_pyarrow_table().num_rows)
    except TableNotFoundError:
        return None


def test_an_erasure_reaches_the_exported_rows(stack: Stack, lake: Lake) -> None:
    stack.put(entitlement_row("u1", "a1", now=NOW))
    stack.put(entitlement_row("u2", "a2", now=NOW))
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    stack.bootstrap(manifest, lake)
    purge_users(lake, ["u1"])
    users = DeltaTable(lake.table_uri(CHANGES)).to_pyarrow_table(columns=["user_id"])["user_id"].to_pylist()
    assert users == ["u2"]


def test_the_bootstrap_keeps_the_export_time_as_the_lakes_history_start(stack: Stack, lake: Lake) -> None:
    stack.put(entitlement_row("u1", "a1", now=NOW))
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    report = stack.bootstrap(manifest, lake)
    assert report.history_starts_at == manifest.exported_at
    assert history_start(DeltaTable(lake.table_uri(CHANGES))) == manifest.exported_at


def test_an_as_of_before_the_export_time_says_the_history_starts_there(stack: Stack, lake: Lake) -> None:
    stack.put(entitlement_row("u1", "a1", now=NOW))
    stack.enable_stream()
    stack.set_status("u1", "a1", EntitlementStatus.CANCELLED)  # a stream change before T: data then
    time.sleep(1.1)
    stack.enable_recovery()
    manifest = stack.export()
    stack.bootstrap(manifest, lake)
    stack.consume(lake)
    with pytest.raises(HistoryStartsLater, match=r"history from .* on \(bootstrapped then\)"):
        connect(lake, as_of=manifest.exported_at - timedelta(milliseconds=500))
    connect(lake, as_of=manifest.exported_at).close()


def test_each_history_audit_says_it_cannot_see_before_the_export_time(
    stack: Stack, lake: Lake, tmp_path: Path
) -> None:
    write_history(stack, 5)
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    stack.bootstrap(manifest, lake)
    report = run_audits(lake, from_snapshot=False)
    assert report.history_starts_at == manifest.exported_at
    ever = [r for r in report.results if r.scope is Scope.EVER]
    assert ever and all(r.note == history_note(manifest.exported_at) for r in ever)
    assert all(not r.note for r in report.results if r.scope is Scope.NOW)
    assert "cannot see before it" in history_note(manifest.exported_at)
    document = orjson.loads(report.to_json())
    assert document["history_starts_at"] is not None
    assert all(r["note"] for r in document["results"] if r["scope"] == "ever")
    junit = render_report(report, "junit")
    assert 'name="history_starts_at"' in junit
    assert junit.count("Note: The lake was bootstrapped at ") == len(ever)
    for fmt in ("markdown", "html"):
        text = render_report(report, fmt)
        assert "History starts" in text and history_note(manifest.exported_at) in text


def test_a_lake_never_bootstrapped_has_no_history_note(stack: Stack, tmp_path: Path) -> None:
    stack.put(entitlement_row("u1", "a1", now=NOW))
    report = run_audits(lake_of_the_table(stack, tmp_path / "table"), from_snapshot=False)
    assert report.history_starts_at is None
    assert not any(r.note for r in report.results)


def _objects(stack: Stack) -> set[str]:
    listed = stack.s3.list_objects_v2(Bucket=stack.bucket).get("Contents", [])
    return {str(entry["Key"]) for entry in listed}


def test_the_exports_data_files_are_deleted_once_landed_and_its_manifests_kept(
    stack: Stack, lake: Lake, small_files: None
) -> None:
    write_history(stack, 20)
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    data = {f.key for f in manifest.files}
    assert data <= _objects(stack)
    report = stack.bootstrap(manifest, lake)
    assert report.files_deleted == len(manifest.files)
    left = _objects(stack)
    assert not data & left
    assert any(key.endswith("/manifest-summary.json") for key in left)
    assert any(key.endswith("/manifest-files.json") for key in left)


def test_a_rerun_after_the_files_were_deleted_reads_the_export_and_lands_nothing(
    stack: Stack, lake: Lake, small_files: None
) -> None:
    write_history(stack, 20)
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    stack.bootstrap(manifest, lake)
    summary = f"boot/AWSDynamoDB/{manifest.export_id}/manifest-summary.json"
    again = read_manifest(
        stack.s3, stack.bucket, summary, table_arn=stack.table_arn, landed=lambda arn: landed_files(lake, arn)
    )
    rerun = stack.bootstrap(again, lake)
    assert (rerun.items_landed, rerun.files_skipped) == (0, len(manifest.files))
    assert _landed_identities(lake, manifest.export_arn) == (manifest.item_count, manifest.item_count)


def test_an_export_kept_on_request_keeps_its_data_files(stack: Stack, lake: Lake) -> None:
    write_history(stack, 5)
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    report = stack.bootstrap(manifest, lake, delete_export=False)
    assert report.files_deleted == 0
    assert {f.key for f in manifest.files} <= _objects(stack)


class _NoDeletes:
    """The export's bucket read as usual, its deletes refused (no s3:DeleteObject permission)."""

    def __init__(self, s3: Any) -> None:
        self._s3 = s3

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        answer: dict[str, Any] = self._s3.get_object(**kwargs)
        return answer

    def head_object(self, **kwargs: Any) -> dict[str, Any]:
        answer: dict[str, Any] = self._s3.head_object(**kwargs)
        return answer

    def delete_object(self, **kwargs: Any) -> dict[str, Any]:
        error = {"Error": {"Code": "AccessDenied", "Message": "denied"}}
        raise ClientError(error, "DeleteObject")


def test_a_refused_delete_says_the_export_is_landed_and_its_files_left(stack: Stack, lake: Lake) -> None:
    write_history(stack, 5)
    stack.enable_stream()
    stack.enable_recovery()
    manifest = stack.export()
    with pytest.raises(BootstrapRefused) as refused:
        stack.bootstrap(manifest, lake, s3=_NoDeletes(stack.s3))
    said = str(refused.value)
    assert "the export is landed, but its data file 1 could not be deleted (AccessDenied)" in said
    assert _landed_identities(lake, manifest.export_arn) == (manifest.item_count, manifest.item_count)
    assert {f.key for f in manifest.files} <= _objects(stack)

"""The bootstrap from an export: the stream's coverage checked, the export ordered among the stream's
changes, then its data files landed, each once."""

from __future__ import annotations

__all__ = ["BootstrapReport", "begin_report", "bootstrap_export", "check_coverage"]

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from analytics.bootstrap._boundary import ExportOrder, StreamReader, read_export_order, stream_covered_from
from analytics.bootstrap._cleanup import S3Deleter, delete_data_files
from analytics.bootstrap._errors import StreamGap
from analytics.bootstrap._land import land_items, landed_files, one_commit_per_file
from analytics.bootstrap._manifest import ExportManifest, S3Reader, read_data_file
from analytics.lake import AllowList, Lake, LakeHandler, default_allow_list
from analytics.lake.history_start import record_history_start
from config import BootstrapSettings, LakeSettings


class ExportStore(S3Reader, S3Deleter, Protocol):
    """The export's bucket: read, and its data files deleted once landed."""


@dataclass
class BootstrapReport:
    source_arn: str
    exported_at: datetime
    files: int
    files_landed: int = 0
    files_skipped: int = 0  # landed by an earlier run
    items_landed: int = 0
    stream_records_read: int = 0
    gap: timedelta | None = None  # accepted with --accept-gap
    history_starts_at: datetime | None = None  # the lake's history start kept (an earlier bootstrap's T)
    files_deleted: int = 0  # the export's data files deleted from S3 once all were landed


def check_coverage(
    streams_created: datetime | None,
    *,
    exported_at: datetime,
    now: datetime,
    settings: BootstrapSettings,
    accept_gap: bool,
    progress: Callable[[str], None],
) -> timedelta | None:
    """Whether the stream holds every change from T on: it must have existed at T (created no later than
    T: a stream enabled just before the export is enough, as the export holds what came before), and its
    retention horizon must lie at least the margin before T (the horizon moves on while the consumer
    starts). A shortfall is raised as `StreamGap` unless accepted (then said on a progress line and
    returned)."""
    horizon = stream_covered_from(None, now=now, retention=timedelta(hours=settings.stream_retention_hours))
    shortfalls = [(exported_at - timedelta(seconds=settings.margin_seconds), horizon)]
    if streams_created is not None:
        shortfalls.append((exported_at, streams_created))
    needed, covered = max(shortfalls, key=lambda pair: pair[1] - pair[0])
    if covered <= needed:
        return None
    gap = StreamGap(needed, covered)
    if not accept_gap:
        raise gap
    progress(f"accepted: {gap}")
    return gap.gap


def begin_report(
    streams: StreamReader,
    stream_arn: str,
    *,
    source_arn: str,
    as_of: datetime,
    files: int,
    settings: BootstrapSettings,
    now: datetime,
    accept_gap: bool,
    progress: Callable[[str], None],
) -> tuple[ExportOrder, BootstrapReport]:
    """The stream's order of the items up to `as_of` (the export's or the scan's time), its coverage
    checked (`check_coverage`), and the report of landing `files` from `source_arn` begun with both:
    the export and the scan start alike."""
    order, created = read_export_order(
        streams,
        stream_arn,
        exported_at=as_of,
        precision=timedelta(seconds=settings.time_precision_seconds),
    )
    report = BootstrapReport(source_arn, as_of, files)
    report.stream_records_read = order.records_read
    report.gap = check_coverage(
        created, exported_at=as_of, now=now, settings=settings, accept_gap=accept_gap, progress=progress
    )
    return order, report


def bootstrap_export(
    manifest: ExportManifest,
    *,
    s3: ExportStore,
    streams: StreamReader,
    stream_arn: str,
    lake: Lake,
    lake_settings: LakeSettings,
    allow_list: AllowList | None,
    settings: BootstrapSettings,
    now: datetime,
    accept_gap: bool,
    progress: Callable[[str], None],
    delete_export: bool = True,
) -> BootstrapReport:
    """Land `manifest`'s items as the lake's state at its export time (docs/operations/bootstrap.md);
    then, unless `delete_export` is false, delete its data files from S3 (`delete_data_files`)."""
    order, report = begin_report(
        streams,
        stream_arn,
        source_arn=manifest.export_arn,
        as_of=manifest.exported_at,
        files=len(manifest.files),
        settings=settings,
        now=now,
        accept_gap=accept_gap,
        progress=progress,
    )
    progress(f"stream read up to the export time: {order.records_read} records before it")
    report.history_starts_at = record_history_start(
        lake, allow_list or default_allow_list(), manifest.exported_at
    )
    done = landed_files(lake, manifest.export_arn)
    handler = LakeHandler(lake, one_commit_per_file(lake_settings), allow_list=allow_list, name="bootstrap")
    total = len(manifest.files)
    for data_file in manifest.files:
        if data_file.name in done:
            report.files_skipped += 1
            progress(f"file {data_file.index + 1}/{total}: landed by an earlier run, skipped")
            continue
        lines = read_data_file(s3, manifest.bucket, data_file)
        report.items_landed += land_items(
            handler,
            source_arn=manifest.export_arn,
            shard_id=data_file.name,
            file_index=data_file.index,
            lines=lines,
            exported_at=manifest.exported_at,
            order=order,
        )
        report.files_landed += 1
        progress(
            f"file {data_file.index + 1}/{total}: {len(lines)} items landed ({report.items_landed} so far)"
        )
    if delete_export:
        report.files_deleted = delete_data_files(s3, manifest)
        progress(f"the export's {report.files_deleted} data files deleted from S3 (the manifests are kept)")
    return report

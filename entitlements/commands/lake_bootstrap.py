"""`entitlements lake bootstrap`: a table that already has history, landed as the lake's state at a
point-in-time export's time T, before the consumer applies the stream's changes from T onward
(docs/operations/bootstrap.md).

    entitlements lake bootstrap                      # start an export, wait for it, land it
    entitlements lake bootstrap --export-arn ARN     # land an export that was started elsewhere
    entitlements lake bootstrap --export s3://bucket/prefix/AWSDynamoDB/<export id>/

Progress goes to stderr, one line a step; the result to stdout. A refused export is one line and exit 2,
with nothing of it landed; a rerun after a kill lands each exported item once. Once every data file is
landed they are deleted from S3 (`--keep-export` keeps them); the manifests stay, so a rerun still
reads the export and lands nothing.
"""

from __future__ import annotations

__all__ = ["bootstrap_command"]

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from entitlements._logging import configure_logging

# The bootstrap, the lake, boto3 and the settings are imported where they are used: `lake --help` builds
# this command and must load none of them.
if TYPE_CHECKING:
    from analytics.bootstrap import BootstrapReport
    from config import Settings


def _say(line: str) -> None:
    typer.echo(f"bootstrap: {line}", err=True)


def _table(dynamodb: Any, table_name: str) -> tuple[str, str]:
    from analytics.bootstrap import BootstrapRefused  # noqa: PLC0415 (kept off --help)
    from schema.aws_errors import converted  # noqa: PLC0415

    with converted("DynamoDB DescribeTable"):
        table = dynamodb.describe_table(TableName=table_name)["Table"]
    stream_arn = table.get("LatestStreamArn")
    if not stream_arn or not table.get("StreamSpecification", {}).get("StreamEnabled", False):
        raise BootstrapRefused("the table has no stream enabled: enable it (entitlements table create) first")
    return str(table["TableArn"]), str(stream_arn)


def _location(
    settings: Settings,
    dynamodb: Any,
    table_arn: str,
    *,
    export_arn: str | None,
    export_uri: str | None,
    say: Callable[[str], None],
) -> tuple[str, str]:
    """(bucket, summary key) of the export to land: given by its S3 folder, by its ARN, or started now."""
    from analytics.bootstrap import (  # noqa: PLC0415 (kept off --help)
        BootstrapRefused,
        split_s3_uri,
        start_export,
        wait_for_export,
    )

    if export_uri is not None:
        return split_s3_uri(export_uri)
    options = settings.bootstrap
    if export_arn is None:
        export_arn = start_export(
            dynamodb, table_arn=table_arn, bucket=options.export_bucket, prefix=options.export_prefix
        )
        say("point-in-time export started")
    elif export_arn.split("/export/")[0] != table_arn:
        raise BootstrapRefused("the export is of another table than the configured one")
    where = wait_for_export(
        dynamodb,
        export_arn,
        poll_seconds=options.poll_seconds,
        timeout_seconds=options.wait_timeout_seconds,
        progress=say,
    )
    return where.bucket, where.summary_key


def _report(report: BootstrapReport) -> None:
    typer.echo(
        f"bootstrap at {report.exported_at.isoformat()}: {report.items_landed} items landed from "
        f"{report.files_landed} files, {report.files_skipped} files landed before, of {report.files}"
    )
    if report.gap is not None:
        typer.echo(f"not covered (accepted): {report.gap} of changes before the stream's oldest")
    if report.files_deleted:
        typer.echo(f"the export's {report.files_deleted} data files were deleted from S3 (manifests kept)")
    if report.history_starts_at is not None:
        typer.echo(
            f"the lake's history starts at {report.history_starts_at.isoformat()}: --as-of before it is "
            "refused, and the history audits cannot see before it"
        )
    typer.echo(
        "next: run `entitlements consume` (from the stream's trim horizon) to apply changes from then on"
    )


def bootstrap_command(
    export_arn: Annotated[
        str | None, typer.Option("--export-arn", help="Land this export (waits while it runs).")
    ] = None,
    export_uri: Annotated[
        str | None,
        typer.Option(
            "--export", help="Land the export in this S3 folder (s3://bucket/.../AWSDynamoDB/<id>/)."
        ),
    ] = None,
    scan: Annotated[
        bool,
        typer.Option(
            "--scan",
            help="No export: a parallel Scan of the table (not a snapshot: the stream settles what changes "
            "during it; ENTITLEMENTS_BOOTSTRAP__SCAN_SEGMENTS segments). A rerun resumes it.",
        ),
    ] = False,
    accept_gap: Annotated[
        bool,
        typer.Option("--accept-gap", help="Land even when the stream does not reach back to the export."),
    ] = False,
    keep_export: Annotated[
        bool,
        typer.Option(
            "--keep-export",
            help="Keep the export's data files in S3 once landed (by default they are deleted: they hold "
            "every item, and the erasure does not reach them there).",
        ),
    ] = False,
) -> None:
    """Land a point-in-time export of the table as the lake's state at its time, before the stream's
    changes from then on. Without --export-arn or --export it starts one (point-in-time recovery must
    be enabled) into ENTITLEMENTS_BOOTSTRAP__EXPORT_BUCKET and waits for it."""
    from analytics.bootstrap import (  # noqa: PLC0415 (kept off --help)
        BootstrapRefused,
        bootstrap_export,
        bootstrap_scan,
        landed_files,
        read_manifest,
    )
    from analytics.lake import lake_from_settings  # noqa: PLC0415
    from config import load_settings  # noqa: PLC0415
    from entitlements._clients import aws_client  # noqa: PLC0415

    configure_logging("WARNING")
    if sum((export_arn is not None, export_uri is not None, scan)) > 1:
        raise BootstrapRefused("give one of --export-arn, --export and --scan")
    settings = load_settings()
    dynamodb = aws_client(settings.aws, "dynamodb")
    s3 = aws_client(settings.aws, "s3")
    streams = aws_client(settings.aws, "dynamodbstreams")
    table_arn, stream_arn = _table(dynamodb, settings.consumer.table_name)
    # What both ways of bootstrapping take: the stream that follows, the lake, the settings.
    landing: dict[str, Any] = {
        "streams": streams,
        "stream_arn": stream_arn,
        "lake": lake_from_settings(settings),
        "lake_settings": settings.lake,
        "allow_list": None,
        "settings": settings.bootstrap,
        "now": datetime.now(UTC),
        "accept_gap": accept_gap,
        "progress": _say,
    }
    if scan:
        _report(
            bootstrap_scan(dynamodb, table_name=settings.consumer.table_name, table_arn=table_arn, **landing)
        )
        return
    bucket, summary_key = _location(
        settings, dynamodb, table_arn, export_arn=export_arn, export_uri=export_uri, say=_say
    )
    lake = landing["lake"]
    manifest = read_manifest(
        s3, bucket, summary_key, table_arn=table_arn, landed=lambda arn: landed_files(lake, arn)
    )
    _say(f"export of {manifest.item_count} items in {len(manifest.files)} files, at {manifest.exported_at}")
    _report(bootstrap_export(manifest, s3=s3, delete_export=not keep_export, **landing))

"""`entitlements snapshot`, `entitlements sql` and `entitlements compact`: the lake from the command line.

The lake is the settings' `lake.root` (ENTITLEMENTS_LAKE__ROOT): a local directory, or `s3://bucket/prefix`
on the settings' S3 endpoint. Time axes: `snapshot --as-of` takes the stream's creation time
(ApproximateCreationDateTime), not business time from the items; `sql` queries views whose time columns
say which axis they are (schema/lake.md).
"""

from __future__ import annotations

__all__ = ["app"]

import csv
import io
import json
import sys
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.parquet as pq
import typer
from rich.console import Console
from rich.table import Table

from analytics.lake import (
    CompactionResult,
    compact,
    compact_continuously,
    lake_from_settings,
    snapshot,
    snapshot_as_of,
    snapshot_info,
    state_as_of,
)
from analytics.views import connect
from config import load_settings
from entitlements._logging import configure_logging

app = typer.Typer(no_args_is_help=True, add_completion=False, help="The lake (Delta tables).")


class OutputFormat(StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    PARQUET = "parquet"


def _instant(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter("expected an ISO 8601 instant, e.g. 2026-01-31T12:00:00Z") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@app.command("snapshot")
def snapshot_command(
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="The state at this instant (ISO 8601; naive means UTC) by the stream's creation time.",
        ),
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="Rebuild from the whole change log.")] = False,
    output: Annotated[
        Path | None, typer.Option("--output", help="With --as-of: also write the state here.")
    ] = None,
) -> None:
    """Fold the change log into the table's current state, incrementally from the previous snapshot;
    with --as-of, write the state at a past instant instead (the current snapshot is left as it is)."""
    configure_logging("WARNING")
    lake = lake_from_settings(load_settings())
    if as_of is not None:
        result = snapshot_as_of(lake, _instant(as_of))
        if output is not None and result.as_of is not None:
            pq.write_table(state_as_of(lake, result.as_of), output, compression="zstd")
        typer.echo(f"state as of {result.as_of.isoformat() if result.as_of else as_of} (stream time)")
        typer.echo(f"items: {result.rows_written}  change files read: {result.files_read}")
        typer.echo(f"written: {lake.uri_for(result.path or '')}" + (f" and {output}" if output else ""))
        return
    result = snapshot(lake, full=full)
    info = snapshot_info(lake)
    kind = "full rebuild" if result.full else "incremental"
    typer.echo(f"snapshot {result.version} ({kind}{', consolidated' if result.consolidated else ''})")
    typer.echo(
        f"change files read: {result.files_read}  skipped by lineage: {result.files_skipped_by_lineage}  "
        f"rows read: {result.rows_read}"
    )
    if info is not None:
        typer.echo(
            f"state files: {len(info.state_files)}  base rows: {info.base_rows}  "
            f"delta rows: {info.delta_rows}  changes version folded: {info.folded_version}"
        )
    through = result.through_created_at.isoformat() if result.through_created_at else "-"
    typer.echo(f"through stream time: {through}")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _emit(table: pa.Table, fmt: OutputFormat, output: Path | None) -> None:
    if fmt is OutputFormat.PARQUET:
        if output is None:
            if sys.stdout.isatty():
                raise typer.BadParameter("--format parquet needs --output PATH or a redirected stdout")
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink, compression="zstd")
            sys.stdout.buffer.write(sink.getvalue().to_pybytes())
            sys.stdout.flush()
            return
        pq.write_table(table, output, compression="zstd")
        typer.echo(f"{table.num_rows} rows written to {output}", err=True)
        return
    rows = table.to_pylist()
    if fmt is OutputFormat.TABLE:
        rendered = Table(*table.column_names, show_lines=False)
        for row in rows:
            rendered.add_row(*(_text(v) for v in row.values()))
        console = Console(file=io.StringIO() if output else sys.stdout, width=250)
        console.print(rendered)
        console.print(f"{table.num_rows} rows")
        if output and isinstance(console.file, io.StringIO):
            output.write_text(console.file.getvalue(), encoding="utf-8")
        return
    if fmt is OutputFormat.CSV:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(table.column_names)
        writer.writerows([_text(v) for v in row.values()] for row in rows)
        text = buffer.getvalue()
    else:
        text = json.dumps(rows, default=_text, indent=1) + "\n"
    if output:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


@app.command("sql")
def sql_command(
    query: Annotated[str, typer.Argument(help="SQL over the lake's views (analytics/sql, schema/lake.md).")],
    fmt: Annotated[
        OutputFormat, typer.Option("--format", help="table, csv, json or parquet.")
    ] = OutputFormat.TABLE,
    output: Annotated[Path | None, typer.Option("--output", help="Write here instead of stdout.")] = None,
    from_log: Annotated[
        bool,
        typer.Option("--from-log", help="Compute current_items from the whole log, not the last snapshot."),
    ] = False,
) -> None:
    """Run a query over the lake's views and print the result."""
    configure_logging("WARNING")
    settings = load_settings()
    lake = lake_from_settings(settings)
    # Accounts being erased are hidden by every connection, before their files are purged.
    con = connect(lake, from_snapshot=not from_log)
    try:
        relation = con.sql(query)
        if relation is None:
            typer.echo("ok", err=True)
            return
        _emit(relation.to_arrow_table(), fmt, output)
    except Exception as error:
        if isinstance(error, typer.BadParameter):
            raise
        typer.echo(f"query failed: {type(error).__name__}: {error}", err=True)
        raise typer.Exit(2) from None
    finally:
        con.close()


@app.command("compact")
def compact_command(
    small_file_mb: Annotated[int, typer.Option(help="Files smaller than this are merged.")] = 32,
    follow: Annotated[bool, typer.Option(help="Keep compacting, every --interval-seconds.")] = False,
    interval_seconds: Annotated[float, typer.Option(help="Pause between runs with --follow.")] = 300.0,
    rounds: Annotated[int, typer.Option(help="With --follow: stop after this many runs (0: never).")] = 0,
    first_tier_mb: Annotated[
        int, typer.Option(help="With --follow: the first tier's file size (about what lands per interval).")
    ] = 8,
) -> None:
    """Merge each partition's small files (a dedupe of partitions a replay landed in, Delta OPTIMIZE, then
    vacuum past retention: analytics/lake/compaction.py). Run one compactor per lake."""
    configure_logging("WARNING")
    lake = lake_from_settings(load_settings())

    def report(result: CompactionResult) -> None:
        for dataset in ("changes", "outcomes"):
            typer.echo(
                f"{dataset}: {result.files_merged.get(dataset, 0)} files merged into "
                f"{result.files_written.get(dataset, 0)}, "
                f"{result.bytes_rewritten.get(dataset, 0)} bytes rewritten, "
                f"{result.duplicates_dropped.get(dataset, 0)} duplicate rows dropped, "
                f"{result.conflicts.get(dataset, 0)} commits lost to a concurrent rewrite"
            )

    if follow:
        compact_continuously(
            lake,
            interval_seconds=interval_seconds,
            first_tier_bytes=first_tier_mb * 1024 * 1024,
            rounds=rounds or None,
            on_round=report,
        )
        return
    report(compact(lake, small_file_bytes=small_file_mb * 1024 * 1024))

"""`entitlements snapshot`, `entitlements sql` and `entitlements compact`: the lake from the command line.

The lake is the settings' `lake.root` (ENTITLEMENTS_LAKE__ROOT): a local directory, or `s3://bucket/prefix`
on the settings' S3 endpoint. Time axes: `--as-of` takes the stream's creation time
(ApproximateCreationDateTime), not business time from the items; `sql` queries views whose time columns
say which axis they are (schema/lake.md).

`sql` is read-only: one SELECT of the lake's views, never a table function (`read_parquet` on lake files
would bypass the erasure mask, `read_csv` read any file on the host) nor a file path as a table, never a
write to the lake or anywhere else; the connection reads only the lake's folder. Its result goes to stdout or,
with `--output PATH`, to a new CSV, Parquet, JSON or text file (the format from `--format`, else the
file's suffix; an existing file only with `--force`: entitlements/commands/_output.py). `sql --as-of T`
and `snapshot --as-of T` read the lake as it stood at T and write nothing to it (`snapshot --as-of T
--output PATH` writes a new Parquet file; `--store` keeps the state in the lake's `snapshots/as_of`
table). A missing or empty lake is one line naming its path and the command that fills it (exit 2),
never an empty answer.
"""

from __future__ import annotations

__all__ = ["app"]

import csv
import io
import json
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from entitlements._logging import configure_logging
from entitlements._progress import LINE_SECONDS, progress
from entitlements.commands._output import SNAPSHOT, SQL, open_output
from schema.errors import TerminalError

# The lake stack (delta-rs, DuckDB, pyarrow), rich and the settings are imported inside the commands:
# `sql --help`, `snapshot --help` and `compact --help` build these commands and load none of them.
if TYPE_CHECKING:
    import pyarrow as pa

    from analytics.lake.compaction import CompactionResult

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


_AS_OF_HELP = (
    "Read the lake as it stood at this instant (ISO 8601; naive means UTC), by stream creation time."
)


class OutputInsideLake(TerminalError):
    """An --output path inside the lake: a read never writes into the lake."""


def _outside_lake(lake_base: str, is_local: bool, output: Path | None) -> None:
    if output is None or not is_local:
        return
    target = output.resolve()
    if target == Path(lake_base) or Path(lake_base) in target.parents:
        raise OutputInsideLake(
            f"--output {output} is inside the lake at {lake_base}: a read never writes into the lake; "
            "choose a path outside it"
        )


@app.command("snapshot")
def snapshot_command(
    as_of: Annotated[str | None, typer.Option("--as-of", help=_AS_OF_HELP)] = None,
    full: Annotated[bool, typer.Option("--full", help="Rebuild from the whole change log.")] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", help="With --as-of: write the state to this new Parquet file (.parquet or .pq)."
        ),
    ] = None,
    store: Annotated[
        bool,
        typer.Option("--store", help="With --as-of: keep the state in the lake's snapshots/as_of table."),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --output file.")] = False,
) -> None:
    """Fold the change log into the table's current state, incrementally from the previous snapshot;
    with --as-of, read the state at a past instant instead (nothing is written to the lake unless
    --store; the current snapshot is left as it is)."""
    import pyarrow.parquet as pq  # noqa: PLC0415 (kept off --help)

    from analytics.lake import lake_from_settings  # noqa: PLC0415
    from analytics.lake.snapshots import snapshot, snapshot_as_of, snapshot_info, state_as_of  # noqa: PLC0415
    from config import load_settings  # noqa: PLC0415

    configure_logging("WARNING")
    settings = load_settings()
    if output is not None and as_of is None:  # it would be ignored: nothing written where it was asked
        raise typer.BadParameter("--output needs --as-of (the state at an instant is what it writes)")
    if output is not None:
        SNAPSHOT.checked(output, force=force)
    lake = lake_from_settings(settings, create=False)
    if as_of is not None:
        instant = _instant(as_of)
        _outside_lake(lake.base, lake.is_local, output)
        with progress("reading the state as of the instant"):
            state = state_as_of(lake, instant)
            if store:
                snapshot_as_of(lake, instant)
        if output is not None:
            with open_output(output, force=force, binary=True) as file:
                pq.write_table(state, file, compression="zstd")
        typer.echo(f"state as of {instant.isoformat()} (stream time)")
        typer.echo(f"items: {state.num_rows}")
        written = [lake.uri_for("snapshots/as_of")] if store else []
        written += [str(output)] if output is not None else []
        typer.echo(
            f"written: {' and '.join(written) if written else 'nothing (--output PATH writes the state)'}"
        )
        return
    with progress("rebuilding the snapshot" if full else "folding new changes into the snapshot"):
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


# Rows rendered between two progress updates while a result is written.
_WRITE_BATCH = 65_536


def _rows(table: pa.Table, step: Any) -> Iterator[dict[str, Any]]:
    for batch in table.to_batches(max_chunksize=_WRITE_BATCH):
        yield from batch.to_pylist()
        step.advance(batch.num_rows)


def _emit(table: pa.Table, fmt: OutputFormat, output: Path | None, *, force: bool = False) -> None:
    from analytics.reports import counted  # noqa: PLC0415 (kept off --help)

    rows = counted(table.num_rows, "row")
    with progress(f"writing {rows}", total=table.num_rows, every=LINE_SECONDS) as step:
        _write_result(table, fmt, output, force, step)
    if output is not None:
        typer.echo(f"{rows} written to {output}", err=True)


def _write_result(table: pa.Table, fmt: OutputFormat, output: Path | None, force: bool, step: Any) -> None:
    import pyarrow as pa  # noqa: PLC0415 (kept off --help)
    import pyarrow.parquet as pq  # noqa: PLC0415
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    from analytics.reports import counted  # noqa: PLC0415

    if fmt is OutputFormat.PARQUET:
        if output is None:
            if sys.stdout.isatty():
                raise typer.BadParameter("--format parquet needs --output PATH or a redirected stdout")
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink, compression="zstd")
            sys.stdout.buffer.write(sink.getvalue().to_pybytes())
            sys.stdout.flush()
            return
        with open_output(output, force=force, binary=True) as file:
            pq.write_table(table, file, compression="zstd")
        step.advance(table.num_rows)
        return
    if fmt is OutputFormat.TABLE:
        rendered = Table(*table.column_names, show_lines=False)
        for row in _rows(table, step):
            rendered.add_row(*(_text(v) for v in row.values()))
        console = Console(file=io.StringIO() if output else sys.stdout, width=250)
        console.print(rendered)
        console.print(counted(table.num_rows, "row"))
        if output and isinstance(console.file, io.StringIO):
            with open_output(output, force=force) as file:
                file.write(console.file.getvalue())
        return
    with open_output(output, force=force) if output else nullcontext(sys.stdout) as file:
        if fmt is OutputFormat.CSV:
            writer = csv.writer(file)
            writer.writerow(table.column_names)
            writer.writerows([_text(v) for v in row.values()] for row in _rows(table, step))
        else:
            file.write(json.dumps(list(_rows(table, step)), default=_text, indent=1) + "\n")


@app.command("sql")
def sql_command(
    query: Annotated[
        str, typer.Argument(help="One SELECT over the lake's views (analytics/sql, schema/lake.md).")
    ],
    *,
    fmt: Annotated[
        OutputFormat | None,
        typer.Option(
            "--format", help="table, csv, json or parquet (default: from --output's suffix, else table)."
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            help="Write the result to this new file (.csv, .json, .parquet or .txt for a table) instead "
            "of stdout.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --output file.")] = False,
    as_of: Annotated[str | None, typer.Option("--as-of", help=_AS_OF_HELP)] = None,
    from_log: Annotated[
        bool,
        typer.Option("--from-log", help="Compute current_items from the whole log, not the last snapshot."),
    ] = False,
) -> None:
    """Run one read-only query over the lake's views and print or export the result."""
    from analytics.lake import lake_from_settings, require_reachable  # noqa: PLC0415 (kept off --help)
    from analytics.lake.views import connect, lock_down, read_only_statement, run_read_only  # noqa: PLC0415
    from config import load_settings  # noqa: PLC0415

    configure_logging("WARNING")
    settings = load_settings()
    instant = _instant(as_of) if as_of is not None else None
    chosen = SQL.format_for(output, fmt, OutputFormat.TABLE, force=force)
    lake = lake_from_settings(settings, create=False)
    _outside_lake(lake.base, lake.is_local, output)
    # Refused before the lake is read: anything but one SELECT of the views (no table function, no file).
    read_only_statement(query)
    require_reachable(lake)  # refused on one line before the step that would print progress lines
    # Accounts being erased are hidden by every connection, before their files are purged.
    with progress("running the query", every=LINE_SECONDS):
        con = connect(lake, from_snapshot=not from_log, as_of=instant)
        try:
            lock_down(con, lake)
            result = run_read_only(con, query)
        finally:
            con.close()
    _emit(result, chosen, output, force=force)


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
    from analytics.lake import lake_from_settings, require_data  # noqa: PLC0415
    from analytics.lake.compaction import compact, compact_continuously  # noqa: PLC0415
    from analytics.lake.maintenance import MaintenancePolicy, MaintenanceRunner  # noqa: PLC0415
    from config import load_settings  # noqa: PLC0415

    configure_logging("WARNING")
    # One run of nothing is a mistake (no lake there); the follower is a service started beside the
    # consumer, so it waits for the lake the consumer creates.
    settings = load_settings()
    lake = lake_from_settings(settings, create=follow)
    if not follow:
        require_data(lake)
    # Only the lake's maintenance leader compacts (two OPTIMIZEs of one version double the rows):
    # this command takes the lease a consume's maintenance otherwise holds, table by table.
    lease = MaintenanceRunner(lake, MaintenancePolicy.from_settings(settings.lake))
    if not follow and not lease.hold():
        typer.echo(
            "lake compact: another process maintains this lake (a consume): nothing compacted", err=True
        )
        raise typer.Exit(1)

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
            exclusive=lease.hold,
        )
        lease.release()
        return
    with progress("compacting tables") as bar:
        result = compact(
            lake, small_file_bytes=small_file_mb * 1024 * 1024, progress=bar.at, exclusive=lease.hold
        )
    lease.release()
    report(result)

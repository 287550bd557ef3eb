"""`entitlements lake migrate`, `entitlements lake files` and `entitlements lake views`: the lake's Delta
tables from the CLI, and the script that opens its views in the DuckDB CLI (with the delta extension)
from any folder or host that reaches the lake; a saved script stays right after later commits:

    duckdb -c "$(entitlements lake views)" -c "FROM entitlements"
    entitlements lake views --include mining > lake.sql && duckdb -init lake.sql
"""

from __future__ import annotations

__all__ = ["app"]

from enum import StrEnum
from typing import Annotated

import typer

from analytics.lake import lake_from_settings
from analytics.lake.migrate import migrate, old_format_files
from analytics.views import SQL_DIR, cli_script, variables_sql
from config import load_settings
from entitlements._logging import configure_logging

app = typer.Typer(no_args_is_help=True, add_completion=False, help="The lake's Delta tables.")


@app.command("migrate")
def migrate_command() -> None:
    """Convert a lake in the old format (named Parquet files, manifests) to Delta tables, in place.
    Resumable: run it again after a crash; it reports what it did and what of the old format is left."""
    configure_logging("WARNING")
    lake = lake_from_settings(load_settings(), create=False)
    result = migrate(lake)
    for table in sorted(set(result.files_migrated) | set(result.commits)):
        typer.echo(
            f"{table}: {result.files_migrated.get(table, 0)} old files, {result.rows_migrated.get(table, 0)} "
            f"rows, {result.commits.get(table, 0)} commits"
        )
    typer.echo(f"old files deleted: {result.files_deleted}  snapshot rebuilt: {result.snapshot_rebuilt}")
    left = old_format_files(lake)
    typer.echo(f"old-format files left: {len(left)}")
    if left:
        raise typer.Exit(1)


@app.command("files")
def files_command() -> None:
    """Print the SET VARIABLE statements naming the tables' current files (what `lake views` starts
    with), for a DuckDB session that defines its own views over them."""
    configure_logging("WARNING")
    typer.echo(variables_sql(lake_from_settings(load_settings(), create=False)))


class Include(StrEnum):
    MINING = "mining"
    AUDITS = "audits"


_INCLUDED = {
    Include.MINING: SQL_DIR / "mining" / "_base.sql",
    Include.AUDITS: SQL_DIR / "audits" / "_parameters.sql",
}


@app.command("views")
def views_command(
    include: Annotated[
        list[Include] | None,
        typer.Option("--include", help="Also the mining reports' helper views or the audits' parameters."),
    ] = None,
) -> None:
    """Print a DuckDB script that opens the lake's views (with their COMMENTs and the erasure mask) in
    the DuckDB CLI, from any folder: duckdb -c "$(entitlements lake views)" -c "FROM entitlements".
    The views read the Delta tables through the delta extension (`LOAD delta`: installed, or loaded by
    path first), as they are at each query, and the erasure mask from the lake; nothing outside it."""
    configure_logging("WARNING")
    lake = lake_from_settings(load_settings(), create=False)
    typer.echo(cli_script(lake, include=[_INCLUDED[i] for i in include or []]), nl=False)

"""`entitlements lake migrate` and `entitlements lake files`: the lake's Delta tables from the CLI."""

from __future__ import annotations

__all__ = ["app"]

import typer

from analytics.lake import lake_from_settings
from analytics.lake.migrate import migrate, old_format_files
from analytics.views import variables_sql
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
    """Print the SET VARIABLE statements naming the tables' current files, for the DuckDB CLI:
    duckdb -c "$(entitlements lake files)" -c ".read analytics/sql/all.sql" -c "FROM entitlements"."""
    configure_logging("WARNING")
    typer.echo(variables_sql(lake_from_settings(load_settings(), create=False)))

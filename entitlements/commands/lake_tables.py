"""`entitlements lake migrate`, `entitlements lake files` and `entitlements lake views`: the lake's Delta
tables from the CLI, and the script that opens its views in the DuckDB CLI (with the delta extension)
from any folder or host that reaches the lake; a saved script stays right after later commits:

    duckdb -c "$(entitlements lake views)" -c "FROM entitlements"
    entitlements lake views --include mining > lake.sql && duckdb -init lake.sql
"""

from __future__ import annotations

__all__ = ["app"]

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

import analytics.sql
from entitlements._logging import configure_logging
from entitlements.commands.lake_bootstrap import bootstrap_command

# The lake stack and the settings are imported inside each command: `lake --help` and its commands'
# help load neither delta-rs nor DuckDB. The SQL folder is found without the views module.
_SQL_DIR = Path(analytics.sql.__file__).parent

app = typer.Typer(no_args_is_help=True, add_completion=False, help="The lake's Delta tables.")
app.command("bootstrap")(bootstrap_command)


@app.command("migrate")
def migrate_command() -> None:
    """Convert a lake in the old format (named Parquet files, manifests) to Delta tables, in place.
    Resumable: run it again after a crash; it reports what it did and what of the old format is left."""
    from analytics.lake import lake_from_settings  # noqa: PLC0415 (kept off --help)
    from analytics.lake.migrate import migrate, old_format_files  # noqa: PLC0415
    from config import load_settings  # noqa: PLC0415

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
    """Print SET VARIABLE statements naming each table's current data files (files of the lake only, as
    of now), for a DuckDB session that reads them itself with read_parquet(..., union_by_name = true).
    `lake views` needs none of them: its views read the tables through delta_scan."""
    from analytics.lake import lake_from_settings  # noqa: PLC0415 (kept off --help)
    from analytics.lake.views import variables_sql  # noqa: PLC0415
    from config import load_settings  # noqa: PLC0415

    configure_logging("WARNING")
    typer.echo(variables_sql(lake_from_settings(load_settings(), create=False)))


class Include(StrEnum):
    MINING = "mining"
    AUDITS = "audits"


_INCLUDED = {
    Include.MINING: _SQL_DIR / "mining" / "_base.sql",
    Include.AUDITS: _SQL_DIR / "audits" / "_parameters.sql",
}


@app.command("views")
def views_command(
    include: Annotated[
        list[Include] | None,
        typer.Option("--include", help="Also the mining reports' helper views or the audits' parameters."),
    ] = None,
    duckdb_file: Annotated[
        Path | None,
        typer.Option(
            "--duckdb",
            help="Write a DuckDB database file of the views at PATH instead of printing the script.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="With --duckdb: replace an existing file.")] = False,
) -> None:
    """Print a DuckDB script that opens the lake's views (with their COMMENTs and the erasure mask) in
    the DuckDB CLI, from any folder: duckdb -c "$(entitlements lake views)" -c "FROM entitlements".
    The views read the Delta tables through the delta extension (`LOAD delta`: installed, or loaded by
    path first), as they are at each query, and the erasure mask from the lake; nothing outside it.
    With --duckdb PATH the same views go into a database file: duckdb PATH -c "LOAD delta" -c "FROM
    entitlements"."""
    from analytics.lake import lake_from_settings  # noqa: PLC0415 (kept off --help)
    from analytics.lake.views import cli_script, write_database  # noqa: PLC0415
    from config import load_settings  # noqa: PLC0415

    configure_logging("WARNING")
    lake = lake_from_settings(load_settings(), create=False)
    if duckdb_file is None:
        typer.echo(cli_script(lake, include=[_INCLUDED[i] for i in include or []]), nl=False)
        return
    if include:
        # The included files set session variables, which a database file does not keep.
        raise typer.BadParameter(
            "--include works with the script only, not with --duckdb", param_hint="--include"
        )
    if duckdb_file.exists() and not force:
        raise typer.BadParameter(f"{duckdb_file} exists (--force replaces it)", param_hint="--duckdb")
    if duckdb_file.exists():
        duckdb_file.unlink()
    write_database(lake, duckdb_file)
    typer.echo(f"written: {duckdb_file}")

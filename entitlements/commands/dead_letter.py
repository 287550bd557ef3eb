"""`entitlements dead-letter list|export|redrive`: records a handler refused for their own content."""

from __future__ import annotations

__all__ = ["app"]

from pathlib import Path
from typing import Annotated

import typer

from config import load_settings
from entitlements._logging import configure_logging
from entitlements.commands._stores import (
    Stores,
    build_recovery,
    exit_if_damaged,
    one_line_errors,
    print_counts,
    print_report,
)
from pipeline.recovery import export_stored, reason_counts

app = typer.Typer(no_args_is_help=True, help=__doc__)

_NEW_FILE = "A new file (never overwritten), created readable by you only (0600)."


@app.command("list")
def list_records() -> None:
    """How many records are dead-lettered, by handler and reason (no content)."""
    with one_line_errors("dead-letter list"):
        stores = Stores.from_settings(load_settings())
        print_counts("dead letters", reason_counts(stores.dead_letters))
        exit_if_damaged("dead-letter list", stores.dead_letters)


@app.command()
def export(destination: Annotated[Path, typer.Argument(help=_NEW_FILE)]) -> None:
    """Write every dead letter (raw bytes as base64, handler, reason, position) to a new 0600 file."""
    with one_line_errors("dead-letter export"):
        stores = Stores.from_settings(load_settings())
        written = export_stored(stores.dead_letters, destination)
    typer.echo(f"exported {written} dead letters to {destination}")
    exit_if_damaged("dead-letter export", stores.dead_letters)


@app.command()
def redrive(
    handler: Annotated[
        str | None, typer.Option(help="Only the letters of this handler; default every handler.")
    ] = None,
) -> None:
    """After a fix: run each dead letter through the consumer's path to the handler that refused it
    (its sinks flushed after it); remove each one no longer refused. Exits 1 while any stays."""
    configure_logging()
    with one_line_errors("dead-letter redrive"):
        settings = load_settings()
        report = build_recovery(settings).redrive_dead_letters(handler)
    print_report("re-driven", report, "still dead-lettered")
    exit_if_damaged("dead-letter redrive", Stores.from_settings(settings).dead_letters)
    if report.remaining:
        raise typer.Exit(1)

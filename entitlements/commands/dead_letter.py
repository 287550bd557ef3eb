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
        print_counts("dead letters", reason_counts(Stores.from_settings(load_settings()).dead_letters))


@app.command()
def export(destination: Annotated[Path, typer.Argument(help=_NEW_FILE)]) -> None:
    """Write every dead letter (raw bytes as base64, handler, reason, position) to a new 0600 file."""
    with one_line_errors("dead-letter export"):
        written = export_stored(Stores.from_settings(load_settings()).dead_letters, destination)
    typer.echo(f"exported {written} dead letters to {destination}")


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
        report = build_recovery(load_settings()).redrive_dead_letters(handler)
    print_report("re-driven", report, "still dead-lettered")
    if report.remaining:
        raise typer.Exit(1)

"""`entitlements quarantine list|export|redrive`: the records the consumer could not decode."""

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
    """How many records are quarantined, by reason (no content)."""
    with one_line_errors("quarantine list"):
        stores = Stores.from_settings(load_settings())
        print_counts("quarantine", reason_counts(stores.quarantine))
        exit_if_damaged("quarantine list", stores.quarantine)


@app.command()
def export(destination: Annotated[Path, typer.Argument(help=_NEW_FILE)]) -> None:
    """Write every quarantined record (raw bytes as base64, reason, position) to a new 0600 file."""
    with one_line_errors("quarantine export"):
        stores = Stores.from_settings(load_settings())
        written = export_stored(stores.quarantine, destination)
    typer.echo(f"exported {written} quarantined records to {destination}")
    exit_if_damaged("quarantine export", stores.quarantine)


@app.command()
def redrive() -> None:
    """After a decoder fix: run every quarantined record through the consumer's path to every handler;
    remove each one that decodes now. Exits 1 while any stays quarantined."""
    configure_logging()
    with one_line_errors("quarantine redrive"):
        settings = load_settings()
        report = build_recovery(settings).redrive_quarantine()
    print_report("re-driven", report, "still quarantined")
    exit_if_damaged("quarantine redrive", Stores.from_settings(settings).quarantine)
    if report.remaining:
        raise typer.Exit(1)

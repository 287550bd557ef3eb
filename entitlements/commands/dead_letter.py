"""`entitlements dead-letter list|export|redrive`: records a handler refused for their own content
(the commands are `entitlements.commands._stores.store_commands`, shared with `quarantine`)."""

from __future__ import annotations

__all__ = ["app"]

from typing import Annotated

import typer

from entitlements.commands._stores import DEAD_LETTERS, redrive_store, store_commands

app = store_commands(DEAD_LETTERS, help_text="Records a handler refused for their own content.")


@app.command()
def redrive(
    handler: Annotated[
        str | None, typer.Option(help="Only the letters of this handler; default every handler.")
    ] = None,
) -> None:
    """After a fix: run each dead letter through the consumer's path to the handler that refused it
    (its sinks flushed after it); remove each one no longer refused. Exits 1 while any stays."""
    redrive_store(DEAD_LETTERS, lambda recovery: recovery.redrive_dead_letters(handler))

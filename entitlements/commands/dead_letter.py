"""`entitlements dead-letter list|export|redrive`: records a handler refused for their own content
(the commands are `entitlements.commands._stores.store_commands`, shared with `quarantine`)."""

from __future__ import annotations

__all__ = ["CONSUMER_HANDLERS", "app"]

from typing import Annotated

import typer

from entitlements.commands._stores import (
    DEAD_LETTERS,
    StoreCommandError,
    read_store,
    redrive_store,
    state_stores,
    store_commands,
)

app = store_commands(DEAD_LETTERS, help_text="Records a handler refused for their own content.")

# The names entitlements.compose.handler_registry registers (journal only with an event journal), known
# here without building the handlers: their clients would need AWS before the name is even checked.
CONSUMER_HANDLERS = ("cleanup", "journal", "lake")


def _check_handler(handler: str) -> None:
    """A --handler that names no handler of the consumer and none a dead letter holds would re-drive
    nothing and exit 0 (a typo read as "all clear"): one line naming the handlers there are."""
    from config import load_settings  # noqa: PLC0415 (kept off --help)

    store = state_stores(load_settings()).dead_letters
    stored = read_store(DEAD_LETTERS, store, lambda: {letter.handler for letter in store})
    if handler in stored or handler in CONSUMER_HANDLERS:
        return
    held = f"; the dead letters are of: {', '.join(sorted(stored))}" if stored else "; none is stored"
    raise StoreCommandError(
        f"dead-letter redrive: --handler names no handler of the consumer (its handlers: "
        f"{', '.join(CONSUMER_HANDLERS)}{held}): name one of them, or leave --handler out for all"
    )


@app.command()
def redrive(
    handler: Annotated[
        str | None, typer.Option(help="Only the letters of this handler; default every handler.")
    ] = None,
) -> None:
    """After a fix: run each dead letter through the consumer's path to the handler that refused it
    (its sinks flushed after it); remove each one no longer refused. Exits 1 while any stays; 2 when
    --handler names no handler."""
    if handler is not None:
        _check_handler(handler)
    redrive_store(DEAD_LETTERS, lambda recovery: recovery.redrive_dead_letters(handler))

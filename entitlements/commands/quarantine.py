"""`entitlements quarantine list|export|redrive`: the records the consumer could not decode
(the commands are `entitlements.commands._stores.store_commands`, shared with `dead-letter`)."""

from __future__ import annotations

__all__ = ["app"]

from entitlements.commands._stores import QUARANTINE, redrive_store, store_commands

app = store_commands(QUARANTINE, help_text="The records the consumer could not decode.")


@app.command()
def redrive() -> None:
    """After a decoder fix: run every quarantined record through the consumer's path to every handler;
    remove each one that decodes now. Exits 1 while any stays quarantined."""
    redrive_store(QUARANTINE, lambda recovery: recovery.redrive_quarantine())

"""Errors raised by the pipeline on purpose."""

from __future__ import annotations

__all__ = ["DecodeError"]

from schema.errors import RecordContext, TerminalError


class DecodeError(TerminalError):
    """A stream record that cannot be turned into a typed event. Retrying cannot help: quarantine it.

    `reason` names what is wrong in words only (which field, which rule). It never holds a key, an
    attribute value or any part of the record's body, so it is safe to log and to store beside the
    quarantined bytes. The position (shard, sequence number, event id) travels in `context`.
    """

    def __init__(self, reason: str, *, context: RecordContext | None = None) -> None:
        super().__init__(reason, context=context)
        self.reason = reason

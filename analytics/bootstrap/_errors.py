"""What a bootstrap refuses: each a `TerminalError` whose message is one line naming the fault, never a
key, an item or an address."""

from __future__ import annotations

__all__ = ["BootstrapRefused", "StreamGap"]

from datetime import datetime, timedelta

from schema.errors import TerminalError


class BootstrapRefused(TerminalError):
    """The export (or the scan) cannot be landed as given: another table's, ION, incremental, unfinished,
    failed, a manifest naming a missing or altered file, an item the decoder refuses. Nothing of it is
    landed past what the message says."""


class StreamGap(TerminalError):
    """The table's stream does not reach back to the export's time T minus the margin: the changes made
    between the start of the gap and the stream's first covered instant can be in neither the export
    nor the stream."""

    def __init__(self, needed_from: datetime, covered_from: datetime) -> None:
        self.needed_from = needed_from
        self.covered_from = covered_from
        self.gap: timedelta = covered_from - needed_from
        super().__init__(
            f"the stream holds changes from {covered_from.isoformat()} on, {_span(self.gap)} after the "
            f"export time minus its margin ({needed_from.isoformat()}): changes in that span cannot be "
            "covered; take a newer export, or run again with --accept-gap to land it anyway"
        )


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s"

"""Reading what the KCL child logged, from the daemon's log: the daemon forwards each line the child
writes on stderr (JSON, `entitlements._logging`), as `Received error line from subprocess [<line>]` and
as the line itself."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

_FORWARDED = "Received error line from subprocess ["


def child_entries(log: Path) -> list[dict[str, Any]]:
    """The child's log entries in the order the daemon logged them, each once."""
    entries: list[dict[str, Any]] = []
    if not log.exists():
        return entries
    for line in log.read_text(errors="replace").splitlines():
        start = line.find(_FORWARDED)
        if start < 0:
            continue
        text = line[start + len(_FORWARDED) :]
        text = text[: text.rfind("]")] if "]" in text else text
        try:
            entry = json.loads(text)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def logged_at(entry: dict[str, Any]) -> float:
    """When the child wrote the entry (its `ts`), in epoch seconds."""
    return datetime.fromisoformat(str(entry["ts"])).timestamp()

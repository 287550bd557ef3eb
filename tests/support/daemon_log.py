"""Reading what the KCL children logged: the daemon copies each line a child writes on stderr (one JSON
object, `entitlements._logging`) to its own stderr, which `DaemonSpec.from_settings` sends to
`children-<worker>.log` beside KCL's own `daemon-<worker>.log`."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any


def children_log(daemon_log: Path) -> Path:
    """The children's log beside a worker's KCL log (`daemon-<worker>.log`)."""
    return daemon_log.with_name(daemon_log.name.replace("daemon-", "children-", 1))


def child_entries(log: Path) -> list[dict[str, Any]]:
    """The children's log entries in the order they were written, each once. `log` is the children's
    log, or the worker's KCL log (`daemon-<worker>.log`), beside which it is found."""
    if log.name.startswith("daemon-"):
        log = children_log(log)
    entries: list[dict[str, Any]] = []
    if not log.exists():
        return entries
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def logged_at(entry: dict[str, Any]) -> float:
    """When the child wrote the entry (its `ts`), in epoch seconds."""
    return datetime.fromisoformat(str(entry["ts"])).timestamp()

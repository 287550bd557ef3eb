"""What `entitlements consumer-status` reports: whether the consumer runs, each shard's figures with the
time they were written and their age, the stores' counts and the cleanup retry queue, as one JSON-ready
dict. Counts and codes only: no record content."""

from __future__ import annotations

__all__ = ["status_lines", "status_report"]

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from config import Settings
from entitlements._clients import SETUP_BOUNDS, aws_client
from entitlements.commands._stores import Stores
from processors.cleanup import queue_counts
from schema.aws_errors import aws_error_code
from telemetry import ConsumerPresence

# The figures a shard's stats file holds, as the report names them.
_SHARD_FIGURES = ("records", "quarantined", "dead_lettered", "parked_batches", "checkpoints")


def _figure(value: Any, as_of: datetime | None, now: datetime) -> dict[str, Any]:
    return {
        "value": value,
        "as_of": None if as_of is None else as_of.isoformat(),
        "age_seconds": None if as_of is None else round(max((now - as_of).total_seconds(), 0.0), 3),
    }


def _shard(path: Path, now: datetime) -> dict[str, Any]:
    try:
        stats = json.loads(path.read_text())
        as_of = datetime.fromisoformat(stats["updated_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return {"file": path.name, "error": "unreadable stats file"}
    age_ms = stats.get("iterator_age_ms")
    figures = {name: _figure(int(stats.get(name, 0)), as_of, now) for name in _SHARD_FIGURES}
    figures["iterator_age_seconds"] = _figure(None if age_ms is None else age_ms / 1000.0, as_of, now)
    figures["events_by_type"] = _figure(dict(sorted(stats.get("events_by_type", {}).items())), as_of, now)
    return {
        "shard_id": stats.get("shard_id", path.stem),
        "updated_at": as_of.isoformat(),
        "age_seconds": figures["records"]["age_seconds"],
        "figures": figures,
    }


def _retry_queue(settings: Settings, name: str, now: datetime) -> dict[str, Any]:
    endpoint = settings.aws.endpoint("sqs") or f"SQS in {settings.aws.region}"
    sqs = aws_client(settings.aws, "sqs", **SETUP_BOUNDS)
    try:
        counts = queue_counts(sqs, sqs.get_queue_url(QueueName=name)["QueueUrl"])
    except ClientError as error:
        code = aws_error_code(error)
        if "NonExistentQueue" in code or "QueueDoesNotExist" in code:
            return {"name": name, "error": f"not found at {endpoint}: run `entitlements cleanup setup`"}
        return {"name": name, "error": f"{code} from {endpoint}"}
    except BotoCoreError as error:
        return {"name": name, "error": f"{type(error).__name__}: {endpoint} did not answer"}
    return {
        "name": name,
        "depth": _figure(sum(counts.values()), now, now),
        **{key: _figure(count, now, now) for key, count in counts.items()},
    }


def status_report(
    settings: Settings, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> dict[str, Any]:
    state_dir = settings.consumer.state_dir
    now = clock()
    stats_dir = state_dir / "stats"
    files = sorted(stats_dir.glob("*.json")) if stats_dir.exists() else []
    stores = Stores.from_settings(settings)
    counts = {
        "quarantine": stores.quarantine.count(),
        "dead_letters": stores.dead_letters.count(),
        "parked_batches": stores.parked.count(),
    }
    return {
        "as_of": now.isoformat(),
        "consumer": ConsumerPresence(state_dir).report().to_json(),
        "shards": [_shard(path, now) for path in files],
        "stores": {name: _figure(count, now, now) for name, count in counts.items()},
        "retry_queue": _retry_queue(settings, settings.cleanup.retry_queue_name, now),
    }


def _age(figure: dict[str, Any]) -> str:
    age = figure["age_seconds"]
    return "age unknown" if age is None else f"{age:.1f}s ago"


def status_lines(report: dict[str, Any]) -> list[str]:
    """The report for a person: the consumer's state, a line per shard (and per event kind), the stores,
    the retry queue."""
    consumer = report["consumer"]
    if consumer["running"]:
        lines = [f"consumer: running (pid {consumer['pid']}, since {consumer['started_at']})"]
        if consumer["metrics_url"]:
            lines[0] += f", metrics {consumer['metrics_url']}"
    elif consumer["stopped_at"]:
        lines = [f"consumer: not running (stopped at {consumer['stopped_at']}); shard figures are as of then"]
    elif consumer["started_at"]:
        lines = [
            f"consumer: not running (started at {consumer['started_at']}, ended without stopping cleanly); "
            "shard figures are as of their time"
        ]
    else:
        lines = ["consumer: not running (no `entitlements consume` on this state folder)"]
    if not report["shards"]:
        lines.append("no shard has reported yet")
    for shard in report["shards"]:
        if "error" in shard:
            lines.append(f"{shard['file']}: {shard['error']}")
            continue
        figures = shard["figures"]
        value = {name: figure["value"] for name, figure in figures.items()}
        age = value["iterator_age_seconds"]
        lines.append(
            f"{shard['shard_id']}: {value['records']} records, {value['quarantined']} quarantined, "
            f"{value['dead_lettered']} dead-lettered, {value['parked_batches']} parked batches, "
            f"{value['checkpoints']} checkpoints, iterator age {'unknown' if age is None else f'{age:.1f}s'} "
            f"(as of {shard['updated_at']}, {_age(figures['records'])})"
        )
        lines.extend(f"    {kind}: {count}" for kind, count in value["events_by_type"].items())
    stores = report["stores"]
    lines.append(f"quarantine: {stores['quarantine']['value']} records")
    lines.append(f"dead letters: {stores['dead_letters']['value']} records")
    lines.append(f"parked: {stores['parked_batches']['value']} batches")
    queue = report["retry_queue"]
    if "error" in queue:
        lines.append(f"retry queue {queue['name']}: unknown ({queue['error']})")
    else:
        lines.append(
            f"retry queue {queue['name']}: {queue['depth']['value']} messages "
            f"({queue['visible']['value']} visible, {queue['in_flight']['value']} in flight, "
            f"{queue['delayed']['value']} delayed)"
        )
    return lines

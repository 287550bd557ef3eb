"""Columnar buffers: typed events and outcome events become column lists, then one Arrow table per file.

Building column lists and calling `pa.table` once per file is the fast way to build Arrow from Python
(row dicts are much slower). Only allow-listed attributes are read from an item: anything else, the
processor token first of all, is never copied into a buffer.
"""

from __future__ import annotations

__all__ = ["ChangeBuffer", "OutcomeBuffer", "PendingFile"]

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Any

import pyarrow as pa

from analytics.lake._files import change_file_name, outcome_file_name, partition_dir
from analytics.lake._schema import (
    CHANGES,
    LAKE_SCHEMA_VERSION,
    OUTCOMES,
    OUTCOMES_SCHEMA,
    AllowList,
    changes_schema,
)
from pipeline.events import StreamEvent, sortable_sequence
from schema.outcomes import OutcomeEvent

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class PendingFile:
    """One file to write: its lake-relative path and rows (sorted by identity)."""

    relative: str
    table: pa.Table


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _json_default(value: object) -> object:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    return str(value)


def _decimal_text(value: Decimal) -> str:
    return format(value, "f") if value == value.to_integral_value() else str(value)


def to_text(value: object) -> str | None:
    """A value as text: strings as they are, numbers exactly, anything else in a stable form."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return _decimal_text(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    return json.dumps(value, sort_keys=True, default=_json_default)


def to_int64(value: object) -> int | None:
    """An integral Number as int64; anything else (a string, a fraction, out of range) is None."""
    number: int | None = None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, Decimal):
        try:
            if value.is_finite() and value == value.to_integral_value():
                number = int(value)
        except InvalidOperation:
            return None
    if number is None or not _INT64_MIN <= number <= _INT64_MAX:
        return None
    return number


def to_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None
    return float(value)


def to_bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def ttl_columns(value: object) -> tuple[int | None, str | None, str | None]:
    """(number, raw text, DynamoDB type) of a ttl: a string or a millisecond value stays visible."""
    if value is None:
        return None, None, None
    if isinstance(value, str):
        return None, value, "S"
    if isinstance(value, (int, Decimal, float)) and not isinstance(value, bool):
        return to_int64(value), to_text(value), "N"
    return None, to_text(value), type(value).__name__


_SIMPLE = {"string": to_text, "int64": to_int64, "float64": to_float, "bool": to_bool}


def _attribute(item: Any, name: str) -> object:
    value = item.__dict__.get(name)
    if value is None:
        extra = item.__pydantic_extra__
        if extra:
            value = extra.get(name)
    return value


class ChangeBuffer:
    """Typed events as columns of the change log. Deduplicates by identity within the buffer."""

    def __init__(self, allow: AllowList) -> None:
        self.schema = changes_schema(allow)
        self._allow = allow
        self._columns: dict[str, list[Any]] = {}
        self._groups: list[tuple[date, str, str]] = []
        self._seen: set[tuple[str, str, str]] = set()
        # (attribute, converter or None for ttl, target column lists) per image side.
        self._plans: dict[str, list[tuple[str, Any, tuple[list[Any], ...]]]] = {}
        self.clear()

    def __len__(self) -> int:
        return len(self._groups)

    def clear(self) -> None:
        self._columns = {name: [] for name in self.schema.names}
        self._groups = []
        self._seen = set()
        self._plans = {}
        for side in ("old", "new"):
            plan: list[tuple[str, Any, tuple[list[Any], ...]]] = []
            for spec in self._allow.attributes:
                targets = tuple(self._columns[f"{side}_{f.name}"] for f in spec.fields())
                plan.append((spec.attribute, None if spec.type == "ttl" else _SIMPLE[spec.type], targets))
            self._plans[side] = plan

    def append(self, event: StreamEvent) -> bool:
        """Buffer one event; False when the same event (stream, shard, sequence) is already buffered."""
        position = event.position
        identity = (position.stream_arn, position.shard_id, position.sequence_number)
        if identity in self._seen:
            return False
        self._seen.add(identity)
        created = _utc(event.created_at)
        c = self._columns
        c["schema_version"].append(LAKE_SCHEMA_VERSION)
        c["stream_arn"].append(position.stream_arn)
        c["shard_id"].append(position.shard_id)
        c["sequence_number"].append(position.sequence_number)
        c["sequence_key"].append(sortable_sequence(position.sequence_number))
        c["event_id"].append(event.event_id)
        c["event_type"].append(event.event_type.value)
        c["change_kind"].append(event.change.value)
        c["created_at"].append(created)
        c["ttl_deletion"].append(event.ttl_deletion)
        c["pk"].append(to_text(event.keys.get("pk")))
        c["sk"].append(to_text(event.keys.get("sk")))
        c["item_kind"].append(event.item_kind.value)
        c["user_id"].append(event.user_id)
        c["has_old_image"].append(event.old_item is not None)
        c["has_new_image"].append(event.new_item is not None)
        for side, item in (("old", event.old_item), ("new", event.new_item)):
            for attribute, convert, targets in self._plans[side]:
                value = None if item is None else _attribute(item, attribute)
                if convert is None:
                    for target, part in zip(targets, ttl_columns(value), strict=True):
                        target.append(part)
                else:
                    targets[0].append(convert(value))
        self._groups.append((created.date(), position.stream_arn, position.shard_id))
        return True

    def files(self) -> Iterator[PendingFile]:
        """One file per (event date, stream, shard), rows in sequence order, named by their range."""
        if not self._groups:
            return
        table = pa.table(self._columns, schema=self.schema)
        by_group: dict[tuple[date, str, str], list[int]] = {}
        for index, group in enumerate(self._groups):
            by_group.setdefault(group, []).append(index)
        keys = self._columns["sequence_key"]
        for (day, stream_arn, shard_id), indices in sorted(by_group.items()):
            indices.sort(key=keys.__getitem__)
            name = change_file_name(stream_arn, shard_id, keys[indices[0]], keys[indices[-1]])
            yield PendingFile(f"{partition_dir(CHANGES, day)}/{name}", table.take(indices))


class OutcomeBuffer:
    """Outcome events as columns of the outcomes dataset. Deduplicates by outcome id."""

    schema = OUTCOMES_SCHEMA

    def __init__(self) -> None:
        self._columns: dict[str, list[Any]] = {}
        self._days: list[date] = []
        self._seen: set[str] = set()
        self.clear()

    def __len__(self) -> int:
        return len(self._days)

    def clear(self) -> None:
        self._columns = {name: [] for name in self.schema.names}
        self._days = []
        self._seen = set()

    def append(self, outcome: OutcomeEvent) -> bool:
        if outcome.outcome_id in self._seen:
            return False
        self._seen.add(outcome.outcome_id)
        occurred = _utc(outcome.occurred_at)
        sequence = outcome.source_sequence_number
        c = self._columns
        c["schema_version"].append(outcome.schema_version)
        c["outcome_id"].append(outcome.outcome_id)
        c["kind"].append(outcome.kind.value)
        c["occurred_at"].append(occurred)
        c["user_id"].append(outcome.user_id)
        c["array_account_id"].append(outcome.array_account_id)
        c["source_event_id"].append(outcome.source_event_id)
        c["source_stream_arn"].append(outcome.source_stream_arn)
        c["source_shard_id"].append(outcome.source_shard_id)
        c["source_sequence_number"].append(sequence)
        c["source_sequence_key"].append(sortable_sequence(sequence) if sequence else None)
        c["attempt"].append(outcome.attempt)
        c["detail"].append(outcome.detail)
        self._days.append(occurred.date())
        return True

    def files(self) -> Iterator[PendingFile]:
        if not self._days:
            return
        table = pa.table(self._columns, schema=self.schema)
        by_day: dict[date, list[int]] = {}
        for index, day in enumerate(self._days):
            by_day.setdefault(day, []).append(index)
        ids = self._columns["outcome_id"]
        for day, indices in sorted(by_day.items()):
            indices.sort(key=ids.__getitem__)
            name = outcome_file_name(ids[i] for i in indices)
            yield PendingFile(f"{partition_dir(OUTCOMES, day)}/{name}", table.take(indices))

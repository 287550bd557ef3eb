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

from analytics.lake._schema import (
    CHANGES,
    LAKE_SCHEMA_VERSION,
    OUTCOMES,
    OUTCOMES_SCHEMA,
    AllowList,
    changes_schema,
    parse_business_time,
)
from pipeline.events import StreamEvent, sortable_sequence
from schema.outcomes import OutcomeEvent, preferred_outcome

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class PendingFile:
    """Rows of one table and one partition day, sorted by identity (the landing commits every pending
    part of a table in one commit)."""

    dataset: str
    day: date
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


_EMPTY: dict[str, Any] = {}


def _strings(values: list[Any]) -> list[str | None]:
    return [v if v is None or type(v) is str else to_text(v) for v in values]


def _business_times(texts: list[str | None]) -> list[datetime | None]:
    """Each text parsed as a UTC instant (`parse_business_time`); a file's rows repeat few distinct
    values, each parsed once."""
    parsed: dict[str, datetime | None] = {}
    out: list[datetime | None] = []
    for text in texts:
        if text is None:
            out.append(None)
            continue
        if text not in parsed:
            parsed[text] = parse_business_time(text)
        out.append(parsed[text])
    return out


def _image_values(images: list[dict[str, Any]], name: str) -> list[Any]:
    """One attribute of many items (None where an item is absent or lacks it), from each item's
    `attributes()` (declared fields and extras alike)."""
    return [image.get(name) for image in images]


class ChangeBuffer:
    """Typed events buffered for the change log. Deduplicates by identity within the buffer.

    Events are kept as they come and turned into columns once per file (a list comprehension per column
    is several times faster than appending to every column per event). Only allow-listed attributes are
    ever read from an item.
    """

    def __init__(self, allow: AllowList) -> None:
        self.schema = changes_schema(allow)
        self._allow = allow
        self._events: list[StreamEvent] = []
        self._seen: set[tuple[str, str, str]] = set()

    def __len__(self) -> int:
        return len(self._events)

    def clear(self) -> None:
        self._events = []
        self._seen = set()

    def append(self, event: StreamEvent) -> bool:
        """Buffer one event; False when the same event (stream, shard, sequence) is already buffered."""
        position = event.position
        identity = (position.stream_arn, position.shard_id, position.sequence_number)
        if identity in self._seen:
            return False
        self._seen.add(identity)
        self._events.append(event)
        return True

    def _columns(
        self, events: list[StreamEvent], sequence_keys: list[str], created: list[datetime]
    ) -> dict[str, list[Any]]:
        positions = [e.position for e in events]
        keys = [e.keys for e in events]
        # StrEnum members are str: Arrow takes them as they are (no per-row `.value` lookups).
        columns: dict[str, list[Any]] = {
            "schema_version": [LAKE_SCHEMA_VERSION] * len(events),
            "stream_arn": [p.stream_arn for p in positions],
            "shard_id": [p.shard_id for p in positions],
            "sequence_number": [p.sequence_number for p in positions],
            "sequence_key": sequence_keys,
            "event_id": [e.event_id for e in events],
            "event_type": [e.event_type for e in events],
            "change_kind": [e.change for e in events],
            "created_at": created,
            "ttl_deletion": [e.ttl_deletion for e in events],
            "pk": _strings([k.get("pk") for k in keys]),
            "sk": _strings([k.get("sk") for k in keys]),
            "item_kind": [e.item_kind for e in events],
            "user_id": [e.user_id for e in events],
            "has_old_image": [e.old_item is not None for e in events],
            "has_new_image": [e.new_item is not None for e in events],
        }
        for side in ("old", "new"):
            items = [e.old_item if side == "old" else e.new_item for e in events]
            images = [_EMPTY if i is None else i.attributes() for i in items]
            for spec in self._allow.attributes:
                values = _image_values(images, spec.attribute)
                if spec.type == "ttl":
                    parts = [ttl_columns(v) for v in values]
                    for index, f in enumerate(spec.fields()):
                        columns[f"{side}_{f.name}"] = [part[index] for part in parts]
                elif spec.type == "string":
                    texts = _strings(values)
                    columns[f"{side}_{spec.column}"] = texts
                    if spec.is_business_time:
                        columns[f"{side}_{spec.time_twin}"] = _business_times(texts)
                else:
                    convert = _SIMPLE[spec.type]
                    columns[f"{side}_{spec.column}"] = [convert(v) for v in values]
        return columns

    def files(self) -> Iterator[PendingFile]:
        """One part per (event date, stream, shard), rows in sequence order."""
        if not self._events:
            return
        keyed = sorted(
            ((sortable_sequence(e.position.sequence_number), e) for e in self._events),
            key=lambda pair: pair[0],
        )
        groups: dict[tuple[date, str, str], tuple[list[StreamEvent], list[str], list[datetime]]] = {}
        for key, event in keyed:
            created = _utc(event.created_at)
            group = (created.date(), event.position.stream_arn, event.position.shard_id)
            members, keys, times = groups.setdefault(group, ([], [], []))
            members.append(event)
            keys.append(key)
            times.append(created)
        for (day, _, _), (members, keys, times) in sorted(groups.items()):
            yield PendingFile(CHANGES, day, pa.table(self._columns(members, keys, times), schema=self.schema))


class OutcomeBuffer:
    """Outcome events as columns of the outcomes dataset. Deduplicates by outcome id: of two final
    outcomes of one expiry (one id), the one first in `FINAL_OUTCOME_PRECEDENCE` is kept."""

    schema = OUTCOMES_SCHEMA

    def __init__(self) -> None:
        self._columns: dict[str, list[Any]] = {}
        self._days: list[date] = []
        self._seen: dict[str, tuple[int, OutcomeEvent]] = {}
        self.clear()

    def __len__(self) -> int:
        return len(self._days)

    def clear(self) -> None:
        self._columns = {name: [] for name in self.schema.names}
        self._days = []
        self._seen = {}

    def append(self, outcome: OutcomeEvent) -> bool:
        seen = self._seen.get(outcome.outcome_id)
        if seen is not None:
            index, kept = seen
            if preferred_outcome(kept, outcome) is kept:
                return False
            self._seen[outcome.outcome_id] = (index, outcome)
            self._set(index, outcome)
            return False
        self._seen[outcome.outcome_id] = (len(self._days), outcome)
        for column in self._columns.values():
            column.append(None)
        self._days.append(_utc(outcome.occurred_at).date())
        self._set(len(self._days) - 1, outcome)
        return True

    def _set(self, index: int, outcome: OutcomeEvent) -> None:
        occurred = _utc(outcome.occurred_at)
        sequence = outcome.source_sequence_number
        c = self._columns
        c["schema_version"][index] = outcome.schema_version
        c["outcome_id"][index] = outcome.outcome_id
        c["kind"][index] = outcome.kind.value
        c["occurred_at"][index] = occurred
        c["user_id"][index] = outcome.user_id
        c["array_account_id"][index] = outcome.array_account_id
        c["source_event_id"][index] = outcome.source_event_id
        c["source_stream_arn"][index] = outcome.source_stream_arn
        c["source_shard_id"][index] = outcome.source_shard_id
        c["source_sequence_number"][index] = sequence
        c["source_sequence_key"][index] = sortable_sequence(sequence) if sequence else None
        c["attempt"][index] = outcome.attempt
        c["detail"][index] = outcome.detail
        self._days[index] = occurred.date()

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
            # A replay's final outcome (same id, another kind) is appended beside the first one's row,
            # never over it; readers keep the one the precedence puts first.
            yield PendingFile(OUTCOMES, day, table.take(indices))

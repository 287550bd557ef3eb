"""Columnar buffers: typed events and outcome events become Arrow columns, one Arrow table per file.

Events are kept as they come and turned into columns once per file, with as little Python per row as
possible: each item class's allowed attributes are read by one C-level getter (no dict per item),
values already of their column's type go to Arrow as they are (only other values are converted one by
one), a business time is parsed once per distinct text, constant columns are repeated by Arrow, each
item class's values are converted apart and put back in item order by Arrow (absent images are nulls,
with nothing read), and the sequence keys are padded and sorted by Arrow. Only
allow-listed attributes are read from an item: anything else, the processor token first of all, is
never copied into a buffer.
"""

from __future__ import annotations

__all__ = ["ChangeBuffer", "OutcomeBuffer", "PendingFile"]

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from enum import Enum
from itertools import repeat
from operator import attrgetter, is_not, methodcaller
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analytics.lake._schema import (
    CHANGES,
    LAKE_SCHEMA_VERSION,
    OUTCOMES,
    OUTCOMES_SCHEMA,
    AllowList,
    AttributeSpec,
    changes_schema,
    parse_business_time,
)
from pipeline import SEQUENCE_WIDTH, StreamEvent, StreamPosition, sortable_sequence
from schema.outcomes import OutcomeEvent, preferred_outcome
from schema.table import ITEM_FIELDS

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_NONE = type(None)
# Python types a column takes as they are (Arrow's own conversion gives what the converters below
# would); `type(v)`, not isinstance: a bool is no int here, a str subclass (an enum) is converted.
_AS_TEXT = frozenset({str, _NONE})
_AS_INT = frozenset({int, _NONE})
_AS_FLOAT = frozenset({float, _NONE})
_AS_BOOL = frozenset({bool, _NONE})
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_NO_TEXT = pa.scalar(None, pa.string())
_NUMBER = pa.scalar("N", pa.string())
_STRING = pa.scalar("S", pa.string())


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


def _types(values: Sequence[Any]) -> set[type]:
    return set(map(type, values))


def _string_array(values: Sequence[Any]) -> pa.Array:
    if _types(values) <= _AS_TEXT:
        return pa.array(values, pa.string())
    return pa.array([v if v is None or type(v) is str else to_text(v) for v in values], pa.string())


def _int64_array(values: Sequence[Any]) -> pa.Array:
    if _types(values) <= _AS_INT:
        try:
            return pa.array(values, pa.int64())
        except OverflowError:  # a Number beyond int64: None, as `to_int64` says
            pass
    return pa.array([to_int64(v) for v in values], pa.int64())


def _float64_array(values: Sequence[Any]) -> pa.Array:
    if _types(values) <= _AS_FLOAT:
        return pa.array(values, pa.float64())
    return pa.array([to_float(v) for v in values], pa.float64())


def _bool_array(values: Sequence[Any]) -> pa.Array:
    if _types(values) <= _AS_BOOL:
        return pa.array(values, pa.bool_())
    return pa.array([to_bool(v) for v in values], pa.bool_())


_SIMPLE: dict[str, Callable[[Sequence[Any]], pa.Array]] = {
    "string": _string_array,
    "int64": _int64_array,
    "float64": _float64_array,
    "bool": _bool_array,
}


def _ttl_arrays(values: Sequence[Any]) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The three ttl columns (`ttl_columns` of each value)."""
    types = _types(values)
    if types <= _AS_INT:
        try:
            numbers = pa.array(values, pa.int64())
        except OverflowError:
            numbers = None
        if numbers is not None:
            # Arrow writes an int64 as Python's str() does: the raw text of an integral Number.
            present = pc.is_valid(numbers)
            return numbers, pc.cast(numbers, pa.string()), pc.if_else(present, _NUMBER, _NO_TEXT)
    if types <= _AS_TEXT:
        texts = pa.array(values, pa.string())
        kinds = pc.if_else(pc.is_valid(texts), _STRING, _NO_TEXT)
        return pa.nulls(len(values), pa.int64()), texts, kinds
    parts = [ttl_columns(v) for v in values]
    return (
        pa.array([p[0] for p in parts], pa.int64()),
        pa.array([p[1] for p in parts], pa.string()),
        pa.array([p[2] for p in parts], pa.string()),
    )


def _business_times(texts: pa.Array) -> pa.Array:
    """Each text parsed as a UTC instant (`parse_business_time`); a file's rows repeat few distinct
    values, each parsed once (Arrow finds them and puts the parsed ones back in place)."""
    encoded = pc.dictionary_encode(texts)
    parsed = [parse_business_time(text) for text in encoded.dictionary.to_pylist()]
    return pa.array(parsed, _TIMESTAMP).take(encoded.indices)


def _value_arrays(spec: AttributeSpec, values: list[Any]) -> tuple[pa.Array, ...]:
    """The columns of one attribute's values (the time twin of a business time aside): the ttl's
    three, or one."""
    if spec.type == "ttl":
        return _ttl_arrays(values)
    return (_SIMPLE[spec.type](values),)


def _null_arrays(spec: AttributeSpec, count: int) -> tuple[pa.Array, ...]:
    """What `_value_arrays` gives for `count` Nones (no image), made by Arrow."""
    return tuple(pa.nulls(count, array.type) for array in _value_arrays(spec, []))


def _well_formed(numbers: list[Any]) -> bool:
    """Whether every one is a sequence number (`pipeline.events.is_sequence_number`), checked a
    column at a time."""
    return (
        _types(numbers) == {str}
        and all(map(str.isascii, numbers))
        and all(map(str.isdigit, numbers))
        and min(map(len, numbers)) > 0
        and max(map(len, numbers)) <= SEQUENCE_WIDTH
    )


class _ImageReader:
    """The allowed attributes of many items (None where an item is absent or lacks one), as
    `Item.attributes()` gives them: an extra shadows a declared field of the same name."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names
        # Per item class: the allowed names it declares (None for a class the contract does not know).
        self._declared: dict[type, tuple[str, ...] | None] = {}

    def _declared_of(self, cls: type) -> tuple[str, ...] | None:
        if cls not in self._declared:
            fields = ITEM_FIELDS.get(cls)
            self._declared[cls] = None if fields is None else tuple(n for n in self._names if n in fields)
        return self._declared[cls]

    def _group(self, cls: type, items: list[Any]) -> dict[str, list[Any]] | None:
        """The columns of items of one class (None for absent images: no values to read): its
        declared attributes read by one C-level getter per item, its extras (rare) laid over them."""
        count = len(items)
        if cls is _NONE:
            return None
        declared = self._declared_of(cls)
        if declared is None:  # not an item class the contract knows: read as the item says
            images = [item.attributes() for item in items]
            return {name: [image.get(name) for image in images] for name in self._names}
        # One map per attribute, not a tuple per item: far fewer objects for the collector to walk.
        found = {name: list(map(attrgetter(name), items)) for name in declared}
        columns = {name: found[name] if name in found else [None] * count for name in self._names}
        if any(map(bool, map(_EXTRA, items))):
            for index, item in enumerate(items):
                for name in item.extra.keys() & columns.keys():
                    columns[name][index] = item.extra[name]
        return columns

    def groups(self, items: list[Any]) -> tuple[list[_Group], np.ndarray | None]:
        """The allowed attributes of `items`, a class at a time: (row count, columns) per class, the
        columns None for absent images; and where each item's row is in the groups laid end to end
        (row i of the items is row place[i] there), None when there is one group."""
        kinds = list(map(type, items))
        classes = list(dict.fromkeys(kinds))
        if len(classes) == 1:
            return [(len(items), self._group(classes[0], items))], None
        # Each class's items together, in item order (a stable sort of their class numbers, by numpy
        # rather than a Python pass over the items per class).
        number = {cls: n for n, cls in enumerate(classes)}
        codes = np.fromiter(map(number.__getitem__, kinds), dtype=np.intp, count=len(kinds))
        order = np.argsort(codes, kind="stable")
        grouped = list(map(items.__getitem__, order.tolist()))
        ends = np.cumsum(np.bincount(codes, minlength=len(classes))).tolist()
        parts = [
            (end - start, self._group(cls, grouped[start:end]))
            for cls, start, end in zip(classes, [0, *ends[:-1]], ends, strict=True)
        ]
        place = np.empty_like(order)
        place[order] = np.arange(len(order))
        return parts, place


_Group = tuple[int, dict[str, list[Any]] | None]
_EXTRA = attrgetter("extra")
_EVENT_FIELDS = tuple(
    attrgetter(name)
    for name in (
        "event_id",
        "event_type",
        "change",
        "ttl_deletion",
        "keys",
        "item_kind",
        "user_id",
        "old_item",
        "new_item",
    )
)
_CREATED_AT = attrgetter("created_at")
_TZINFO = attrgetter("tzinfo")
# Read from a StreamPosition (the buffer's keys), not through the event: no dotted lookup per row.
_SEQUENCE_NUMBER = attrgetter("sequence_number")
_STREAM = attrgetter("stream_arn")
_SHARD = attrgetter("shard_id")
_PK = methodcaller("get", "pk")
_SK = methodcaller("get", "sk")


class ChangeBuffer:
    """Typed events buffered for the change log. Deduplicates by identity within the buffer.

    Events are kept as they come and turned into columns once per file. Only allow-listed attributes
    are ever read from an item.
    """

    def __init__(self, allow: AllowList) -> None:
        self.schema = changes_schema(allow)
        self._allow = allow
        self._reader = _ImageReader(tuple(dict.fromkeys(spec.attribute for spec in allow.attributes)))
        # Each buffered event under its identity, in arrival order. The identity is the position itself:
        # a frozen StreamPosition hashes and compares by its three fields (stream, shard, sequence),
        # with no tuple built per event.
        self._events: dict[StreamPosition, StreamEvent] = {}

    def __len__(self) -> int:
        return len(self._events)

    def clear(self) -> None:
        self._events = {}

    def append(self, event: StreamEvent) -> bool:
        """Buffer one event; False when the same event (stream, shard, sequence) is already buffered."""
        identity = event.position
        if type(identity) is not StreamPosition:
            # A subclass never compares equal to a StreamPosition of the same fields: keyed by its fields.
            identity = StreamPosition(
                stream_arn=identity.stream_arn,
                shard_id=identity.shard_id,
                sequence_number=identity.sequence_number,
            )
        events = self._events
        if identity in events:
            return False
        events[identity] = event
        return True

    def _image(self, columns: dict[str, pa.Array], side: str, items: list[Any]) -> None:
        """The columns of one side's images. Each class's values become Arrow arrays on their own
        (every conversion is per value, so the arrays are those of the whole column, in pieces), absent
        images are nulls with nothing to convert, and Arrow puts the pieces back in item order."""
        groups, place = self._reader.groups(items)
        for spec in self._allow.attributes:
            pieces = [
                _null_arrays(spec, count) if values is None else _value_arrays(spec, values[spec.attribute])
                for count, values in groups
            ]
            arrays = [
                parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
                for parts in zip(*pieces, strict=True)
            ]
            if place is not None:
                arrays = [array.take(place) for array in arrays]
            if spec.type == "ttl":
                for field, array in zip(spec.fields(), arrays, strict=True):
                    columns[f"{side}_{field.name}"] = array
            else:
                columns[f"{side}_{spec.column}"] = arrays[0]
                if spec.is_business_time:
                    columns[f"{side}_{spec.time_twin}"] = _business_times(arrays[0])

    def _table(
        self,
        stream: str,
        shard: str,
        events: Sequence[StreamEvent],
        *,
        sequence_numbers: pa.Array,
        sequence_keys: pa.Array,
        created: Sequence[datetime],
    ) -> pa.Table:
        count = len(events)
        (ids, types, changes, ttl, keys, kinds, users, olds, news) = (
            list(map(field, events)) for field in _EVENT_FIELDS
        )
        # StrEnum members are str: Arrow takes them as they are.
        columns: dict[str, pa.Array] = {
            "schema_version": pa.repeat(pa.scalar(LAKE_SCHEMA_VERSION, pa.int16()), count),
            "stream_arn": pa.repeat(pa.scalar(stream, pa.string()), count),
            "shard_id": pa.repeat(pa.scalar(shard, pa.string()), count),
            "sequence_number": sequence_numbers,
            "sequence_key": sequence_keys,
            "event_id": pa.array(ids, pa.string()),
            "event_type": pa.array(types, pa.string()),
            "change_kind": pa.array(changes, pa.string()),
            "created_at": pa.array(created, _TIMESTAMP),
            "ttl_deletion": pa.array(ttl, pa.bool_()),
            "pk": _string_array(list(map(_PK, keys))),
            "sk": _string_array(list(map(_SK, keys))),
            "item_kind": pa.array(kinds, pa.string()),
            "user_id": pa.array(users, pa.string()),
            "has_old_image": pa.array(list(map(is_not, olds, repeat(None))), pa.bool_()),
            "has_new_image": pa.array(list(map(is_not, news, repeat(None))), pa.bool_()),
        }
        self._image(columns, "old", olds)
        self._image(columns, "new", news)
        return pa.Table.from_arrays([columns[name] for name in self.schema.names], schema=self.schema)

    def files(self) -> Iterator[PendingFile]:
        """One part per (event date, stream, shard), rows in sequence order."""
        if not self._events:
            return
        positions = list(self._events)
        buffered = list(self._events.values())
        numbers = list(map(_SEQUENCE_NUMBER, positions))
        if _well_formed(numbers):
            all_numbers = pa.array(numbers, pa.string())
            # `sortable_sequence` of each, by Arrow: the number left-padded with zeros.
            all_keys = pc.utf8_lpad(all_numbers, width=SEQUENCE_WIDTH, padding="0")
        else:  # `sortable_sequence` raises for the first one that is not a sequence number
            all_keys = pa.array([sortable_sequence(number) for number in numbers], pa.string())
            all_numbers = pa.array(numbers, pa.string())
        # Sorted by key alone and stably (Arrow's sort is stable): events of equal keys (on other
        # shards) keep their order. Keys are ASCII digits, so Arrow's byte order is Python's.
        order = pc.sort_indices(all_keys)
        sequence = order.to_numpy().tolist()
        numbers_sorted, keys_sorted = all_numbers.take(order), all_keys.take(order)
        events = list(map(buffered.__getitem__, sequence))
        positions = list(map(positions.__getitem__, sequence))
        created = list(map(_CREATED_AT, events))
        # The decoder's times are all in UTC (the very object): then there is nothing to convert.
        if set(map(id, map(_TZINFO, created))) != {id(UTC)}:
            created = [m if m.tzinfo is UTC else _utc(m) for m in created]
        days = list(map(datetime.date, created))
        streams = list(map(_STREAM, positions))
        shards = list(map(_SHARD, positions))
        groups: dict[tuple[date, str, str], list[int]] = {}
        if len(set(days)) == len(set(streams)) == len(set(shards)) == 1:
            groups[days[0], streams[0], shards[0]] = list(range(len(events)))
        else:
            for index, group in enumerate(zip(days, streams, shards, strict=True)):
                groups.setdefault(group, []).append(index)
        for (day, stream, shard), rows in sorted(groups.items()):
            if len(rows) == len(events):
                table = self._table(
                    stream,
                    shard,
                    events,
                    sequence_numbers=numbers_sorted,
                    sequence_keys=keys_sorted,
                    created=created,
                )
            else:
                picked = pa.array(rows, pa.int64())
                table = self._table(
                    stream,
                    shard,
                    [events[i] for i in rows],
                    sequence_numbers=numbers_sorted.take(picked),
                    sequence_keys=keys_sorted.take(picked),
                    created=[created[i] for i in rows],
                )
            yield PendingFile(CHANGES, day, table)


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

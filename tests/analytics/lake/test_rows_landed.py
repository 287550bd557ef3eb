"""analytics/lake/_rows.py through the LakeHandler: what lands for a mixed set of events is exactly what
landed before the row building was made faster.

`test_rows_landed.json` holds what the handler landed for the events below, written by the row building
as it stood before that change (commit "Tests (lake): the landed rows of a mixed set of events, kept"):
every data file's partition and rows in file order, with each table's Arrow schema (fields, types,
nullability, metadata). A changed value, type, null, column order, partition or row order fails here.
Rewrite the file only for a change meant to change what lands:
`.venv/bin/python -m tests.analytics.lake.test_rows_landed --write`.

The events cover what the row building distinguishes: every event class, both images absent or present,
extras of every decoded type (Decimal, float, bool, bytes, set, list, map), ttls as integral and
fractional Numbers, strings, out-of-range and non-finite values, business times with offsets, without
one, or not times at all, naive and non-UTC creation times across midnight, several streams and shards,
sequence numbers of several lengths, and repeats within a buffer. A second allow-list adds int64,
float64, bool and business-time attributes, which the shipped one does not have.
"""

from __future__ import annotations

import json
import sys
import tempfile
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.lake import CHANGES, AllowList, Lake, LakeHandler, default_allow_list, open_lake
from analytics.lake._delta import active_files, open_table
from analytics.lake._rows import ChangeBuffer
from analytics.lake._schema import OUTCOMES, load_allow_list
from config import LakeSettings
from pipeline.events import (
    ChangeKind,
    ItemExported,
    StreamEvent,
    StreamPosition,
    UnknownItemChanged,
)
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id
from schema.table import Item, ItemKind, UnknownItem, parse_item
from tests.support.table_events import change_event

EXPECTED = Path(__file__).with_suffix(".json")
_STREAM_A = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"
_STREAM_B = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-02-01T00:00:00.000"
_START = datetime(2026, 3, 1, 22, 30, 0, 123456, tzinfo=UTC)
_PLUS_FIVE = timezone(timedelta(hours=5))
_MINUS_SEVEN = timezone(timedelta(hours=-7))

# Beside the shipped attributes: each simple type, a business time kept as an extra, an integral
# Number of another class.
_WIDE_ATTRIBUTES = [
    {"attribute": "userId", "column": "item_user_id", "type": "string"},
    {"attribute": "status", "column": "status", "type": "string"},
    {"attribute": "createdAt", "column": "item_created_at", "type": "string"},
    {"attribute": "ttl", "column": "ttl", "type": "ttl"},
    {"attribute": "version", "column": "version", "type": "int64"},
    {"attribute": "responseStatus", "column": "response_status", "type": "int64"},
    {"attribute": "score", "column": "score", "type": "float64"},
    {"attribute": "flag", "column": "flag", "type": "bool"},
    {"attribute": "shippedAt", "column": "shipped_at", "type": "string"},
    {"attribute": "note", "column": "note", "type": "string"},
]

# Values an attribute may carry as the decoder gives them (an item's extras, or a declared field of
# an unknown item), each to land through every column type.
_ODD_VALUES: list[Any] = [
    None,
    "text",
    "",
    True,
    False,
    0,
    -7,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    Decimal("42"),
    Decimal("42.000"),
    Decimal("1E+3"),
    Decimal("-0.5"),
    Decimal("1767225600.25"),
    Decimal("NaN"),
    Decimal("Infinity"),
    Decimal("1E+30"),
    0.1,
    -2.5,
    1e300,
    b"\x00\xffbytes",
    {"b", "a"},
    frozenset({3, 1}),
    [1, "two", Decimal("3.5"), None, True],
    {"z": 1, "a": {"nested": [Decimal("2"), b"\x01"]}},
    "2026-03-01T10:00:00+02:00",
    "2026-03-01T10:00:00Z",
    "2026-03-01t10:00:00.5+00:00",
    "2026-03-01T10:00:00",
    "2026-03-01",
    "9999-12-31T23:30:00-05:00",
    "0001-01-01T00:30:00+01:00",
    "not a time",
]


class _Stream:
    """Positions and creation times in stream order, on a few shards of two streams."""

    def __init__(self) -> None:
        self.count = 0
        self.sequence = 10**20

    def position(self) -> tuple[StreamPosition, datetime, str]:
        self.count += 1
        n = self.count
        stream = _STREAM_B if n % 7 == 0 else _STREAM_A
        shard = ("shardId-00000001-aaaa", "shardId-00000002-bbbb", "shardId-3")[n % 3]
        # Sequence numbers of several lengths: the sortable key, not the text, orders a file.
        self.sequence += 1 + (n * 37) % 11
        number = str(n) if n % 5 == 0 else str(self.sequence)
        created: datetime = _START + timedelta(minutes=9 * n, microseconds=n)
        if n % 6 == 0:
            created = created.astimezone(_PLUS_FIVE)
        elif n % 6 == 1:
            created = created.astimezone(_MINUS_SEVEN)
        elif n % 11 == 0:
            created = created.replace(tzinfo=None)  # naive: taken as UTC
        position = StreamPosition(stream_arn=stream, shard_id=shard, sequence_number=number)
        return position, created, f"ev-{n:04d}"


def _entitlement(user: str, account: str, **more: Any) -> dict[str, Any]:
    return {
        "pk": f"USER#{user}",
        "sk": f"ENTITLEMENT#{account}",
        "userId": user,
        "arrayAccountId": account,
        "status": "Active",
        "createdAt": "2026-03-01T22:30:00+00:00",
        "updatedAt": "2026-03-01T22:30:00.250000+00:00",
        "processorToken": f"ptok-{user}",
        "gsi1pk": f"ARRAY#{account}",
        "gsi1sk": "ENTITLEMENT",
        **more,
    }


def _cleanup(user: str, account: str, sk: str, ttl: Any, **more: Any) -> dict[str, Any]:
    return {"pk": f"USER#{user}", "sk": sk, "userId": user, "arrayAccountId": account, "ttl": ttl, **more}


def _typed(
    stream: _Stream, old: dict[str, Any] | None, new: dict[str, Any] | None, *, ttl: bool = False
) -> StreamEvent:
    image = new if new is not None else old
    assert image is not None
    position, created, event_id = stream.position()
    return change_event(
        {"pk": image["pk"], "sk": image["sk"]},
        old,
        new,
        ttl=ttl,
        event_id=event_id,
        position=position,
        created_at=created,
    )


def _unknown(
    stream: _Stream,
    keys: dict[str, Any],
    old: Item | None,
    new: Item | None,
    *,
    user: str | None,
    kind: ItemKind = ItemKind.UNKNOWN,
) -> StreamEvent:
    position, created, event_id = stream.position()
    change = ChangeKind.INSERT if old is None else ChangeKind.REMOVE if new is None else ChangeKind.MODIFY
    return UnknownItemChanged(
        event_id=event_id,
        change=change,
        position=position,
        created_at=created,
        keys=keys,
        item_kind=kind,
        user_id=user,
        old_item=old,
        new_item=new,
    )


def mixed_events() -> list[StreamEvent]:
    """The events the expected tables were landed from (in the order they are added)."""
    stream = _Stream()
    events: list[StreamEvent] = []
    for n in range(12):
        user, account = f"u{n:03d}", f"acct{n:05d}"
        row = _entitlement(user, account, internalNote=f"note-{n}")
        events.append(_typed(stream, None, row))
        cancelled = {**row, "status": "Cancelled", "updatedAt": f"2026-03-02T0{n % 10}:00:00-03:00"}
        events.append(_typed(stream, row, cancelled))
        ttl: Any = (1_767_225_600 + n, str(1_767_225_600 + n), 1_767_225_600_000 + n, Decimal("1767225600"))[
            n % 4
        ]
        record = _cleanup(user, account, "CLEANUP#CANCELLATION", ttl)
        events.append(_typed(stream, None, record))
        if n % 3 == 0:
            events.append(_typed(stream, record, {**record, "ttl": Decimal("1767225600.5")}))
        if n % 2 == 0:
            events.append(_typed(stream, record, None, ttl=True))
        else:
            events.append(_typed(stream, record, None))
        if n % 4 == 1:
            updated = {**cancelled, "updatedAt": "2026-03-03T12:00:00+00:00", "extraNumber": Decimal("5")}
            events.append(_typed(stream, cancelled, updated))
            events.append(_typed(stream, updated, None))
        if n % 5 == 2:
            stale = _cleanup(
                user, account, f"STALE#{account}", 1_767_312_000, createdAt="2026-03-01T23:00:00Z"
            )
            events.append(_typed(stream, None, stale))
    # A row the service's writer never makes: its fields of other types make it an unknown item.
    for index, value in enumerate(_ODD_VALUES):
        keys: dict[str, Any] = {"pk": f"USER#odd{index:02d}", "sk": f"ODDITY#{index}"}
        extra = {
            "userId": value,
            "status": value,
            "createdAt": value,
            "ttl": value,
            "version": value,
            "responseStatus": value,
            "score": value,
            "flag": value,
            "shippedAt": value,
            "note": value,
            "processorToken": "ptok-odd",
        }
        old = UnknownItem(pk=keys["pk"], sk=keys["sk"], extra={"note": "before"}) if index % 2 else None
        new = UnknownItem(pk=keys["pk"], sk=keys["sk"], extra=extra)
        events.append(_unknown(stream, keys, old, new, user=f"odd{index:02d}"))
    # Keys that are not text, or missing; no user; no image at all.
    events.append(
        _unknown(stream, {"pk": Decimal("12"), "sk": b"\x02"}, None, UnknownItem(pk=Decimal("12")), user=None)
    )
    events.append(_unknown(stream, {"pk": "USER#nosk"}, None, None, user="nosk"))
    events.append(
        _unknown(
            stream,
            {"pk": "USER#guard", "sk": "GUARD"},
            None,
            parse_item(
                {"pk": "USER#guard", "sk": "GUARD", "userId": "guard", "version": 3, "lastWrite": "w"}
            ),
            user="guard",
            kind=ItemKind.GUARD,
        )
    )
    idempotency = {
        "pk": "USER#idem",
        "sk": "IDEMPOTENCY#d1",
        "userId": "idem",
        "requestDigest": "digest",
        "responseStatus": 201,
        "responseBody": "{}",
        "ttl": 1_767_225_600,
        "createdAt": "2026-03-01T00:00:00+00:00",
    }
    events.append(
        _unknown(
            stream,
            {"pk": "USER#idem", "sk": "IDEMPOTENCY#d1"},
            None,
            parse_item(idempotency),
            user="idem",
            kind=ItemKind.IDEMPOTENCY,
        )
    )
    position, created, event_id = stream.position()
    exported = parse_item(_entitlement("exp", "acct-exp", score=Decimal("0.75"), flag=True))
    events.append(
        ItemExported(
            event_id=event_id,
            position=position,
            created_at=created,
            keys={"pk": "USER#exp", "sk": "ENTITLEMENT#acct-exp"},
            item_kind=ItemKind.ENTITLEMENT,
            user_id="exp",
            new_item=exported,
        )
    )
    # Repeats within a buffer (the same stream position again) are dropped; repeats of rows a previous
    # flush committed are dropped as replays.
    return [*events[:10], *events[3:9], *events[10:], *events[:4]]


def mixed_outcomes() -> list[OutcomeEvent]:
    """Outcomes with and without a source event, on several days and clocks, with repeats."""
    outcomes: list[OutcomeEvent] = []
    kinds = list(OutcomeKind)
    for n in range(24):
        kind = kinds[n % len(kinds)]
        sourced = n % 5 != 4
        source = f"src-{n % 9:02d}"
        occurred = _START + timedelta(hours=3 * n, microseconds=n)
        if n % 4 == 1:
            occurred = occurred.astimezone(_PLUS_FIVE)
        outcomes.append(
            OutcomeEvent(
                outcome_id=outcome_id(source, kind, n % 3) if sourced else f"unsourced-{n:02d}",
                kind=kind,
                occurred_at=occurred,
                user_id=None if n % 7 == 3 else f"u{n:03d}",
                array_account_id=None if n % 6 == 5 else f"acct{n:05d}",
                source_event_id=source if sourced else None,
                source_stream_arn=(_STREAM_A if n % 2 else _STREAM_B) if sourced else None,
                source_shard_id="shardId-1" if sourced else None,
                source_sequence_number=str(10**20 + n) if sourced else None,
                attempt=n % 3,
                detail=None if n % 2 else f"{200 + n}",
            )
        )
    # One expiry's final outcomes in one buffer (the preferred one is kept), and a plain repeat.
    for minute, kind in enumerate(
        (
            OutcomeKind.CLEANUP_ALREADY_DELETED,
            OutcomeKind.CLEANUP_DELETED,
            OutcomeKind.CLEANUP_REFUSED_BY_GUARD,
        )
    ):
        outcomes.append(
            OutcomeEvent(
                outcome_id=outcome_id("src-final", kind),
                kind=kind,
                occurred_at=_START + timedelta(minutes=minute),
                user_id="u-final",
                array_account_id="acct-final",
                source_event_id="src-final",
                source_stream_arn=_STREAM_A,
                source_shard_id="shardId-2",
                source_sequence_number="77",
            )
        )
    return [*outcomes, outcomes[2]]


def _wide_allow_list(folder: Path) -> AllowList:
    path = folder / "wide_allow_list.json"
    path.write_text(json.dumps({"version": 3, "attributes": _WIDE_ATTRIBUTES}), encoding="utf-8")
    return load_allow_list(path)


def _land(lake: Lake, allow: AllowList | None) -> None:
    # A small flush_rows: several commits, and files cut where the buffer fills (changes and outcomes
    # share the count).
    handler = LakeHandler(lake, LakeSettings(flush_rows=45, flush_seconds=3600), allow_list=allow)
    for event in mixed_events():
        handler.add(event)
    for outcome in mixed_outcomes():
        handler.add_outcome(outcome)
    handler.flush()


def _value(value: object) -> object:
    """A landed value as JSON: a time or a day as ISO text, a float as its repr (exact, and NaN-safe)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    return value


def _landed_table(lake: Lake, name: str) -> dict[str, Any]:
    """Each data file of the table (its partition folder and rows in file order, by column) and the one
    schema every file carries."""
    schemas: set[str] = set()
    parts: list[dict[str, Any]] = []
    for path, _ in active_files(open_table(lake, name)):
        table = pq.read_table(lake.path(f"{name}/{path}"))
        # delta-rs writes the parts of one partition in no fixed order: rows are compared by identity
        # (the buffers' own order is compared before the write, `_buffered_files`).
        table = table.sort_by([(column, "ascending") for column in _IDENTITY[name]])
        schemas.add(table.schema.to_string(show_field_metadata=True, show_schema_metadata=True))
        parts.append(
            {"partition": path.rsplit("/", 1)[0], "rows": table.num_rows, "columns": _columns(table)}
        )
    # Data file names are random: the files are ordered by what they hold.
    parts.sort(key=lambda part: json.dumps(part, sort_keys=True))
    assert len(schemas) == 1, "every data file of a table carries the table's schema"
    return {"schema": schemas.pop(), "files": parts}


_IDENTITY = {CHANGES: ("stream_arn", "shard_id", "sequence_key"), OUTCOMES: ("outcome_id", "kind")}


def _columns(table: pa.Table) -> dict[str, list[object]]:
    return {column: [_value(v) for v in table[column].to_pylist()] for column in table.column_names}


def _buffered_files(allow: AllowList | None) -> list[dict[str, Any]]:
    """The parts the change buffer makes of all the mixed events at once, in its own order."""
    buffer = ChangeBuffer(allow or default_allow_list())
    for event in mixed_events():
        buffer.append(event)
    return [{"day": part.day.isoformat(), "columns": _columns(part.table)} for part in buffer.files()]


def landed(folder: Path) -> dict[str, Any]:
    """What the handler lands for the mixed events and outcomes, with the shipped and the wide
    allow-list, each in a lake of its own under `folder`."""
    out: dict[str, Any] = {}
    for label, allow in (("shipped", None), ("wide", _wide_allow_list(folder))):
        lake = open_lake(str(folder / f"lake-{label}"))
        _land(lake, allow)
        out[label] = {name: _landed_table(lake, name) for name in (CHANGES, OUTCOMES)}
        out[label]["buffered"] = _buffered_files(allow)
    return out


@pytest.fixture(scope="module")
def actual(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return landed(tmp_path_factory.mktemp("rows-landed"))


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EXPECTED.read_text(encoding="utf-8"))
    return document


@pytest.mark.parametrize("allow", ["shipped", "wide"])
@pytest.mark.parametrize("name", [CHANGES, OUTCOMES])
def test_the_landed_schema_is_the_one_landed_before(
    actual: dict[str, Any], expected: dict[str, Any], allow: str, name: str
) -> None:
    assert actual[allow][name]["schema"] == expected[allow][name]["schema"]


@pytest.mark.parametrize("allow", ["shipped", "wide"])
@pytest.mark.parametrize("name", [CHANGES, OUTCOMES])
def test_the_landed_files_and_rows_are_the_ones_landed_before(
    actual: dict[str, Any], expected: dict[str, Any], allow: str, name: str
) -> None:
    got, want = actual[allow][name]["files"], expected[allow][name]["files"]
    assert [(p["partition"], p["rows"]) for p in got] == [(p["partition"], p["rows"]) for p in want]
    for number, (got_part, want_part) in enumerate(zip(got, want, strict=True)):
        assert list(got_part["columns"]) == list(want_part["columns"]), f"file {number}: column order"
        for column, values in want_part["columns"].items():
            assert got_part["columns"][column] == values, f"file {number}, column {column}"


@pytest.mark.parametrize("allow", ["shipped", "wide"])
def test_the_change_buffers_parts_hold_the_rows_they_held_before_in_the_same_order(
    actual: dict[str, Any], expected: dict[str, Any], allow: str
) -> None:
    got, want = actual[allow]["buffered"], expected[allow]["buffered"]
    assert [p["day"] for p in got] == [p["day"] for p in want]
    for number, (got_part, want_part) in enumerate(zip(got, want, strict=True)):
        assert list(got_part["columns"]) == list(want_part["columns"]), f"part {number}: column order"
        for column, values in want_part["columns"].items():
            assert got_part["columns"][column] == values, f"part {number}, column {column}"


def test_the_mixed_events_reach_what_the_row_building_distinguishes(expected: dict[str, Any]) -> None:
    # The expected file must hold each case, or the comparison above would prove little.
    files = expected["shipped"][CHANGES]["files"]
    columns = {name: [v for part in files for v in part["columns"][name]] for name in files[0]["columns"]}
    assert len({part["partition"] for part in files}) >= 2
    assert len({part["day"] for part in expected["shipped"]["buffered"]}) >= 2
    assert {"N", "S", "bool", "set", "dict", "bytes"} <= set(columns["new_ttl_type"])
    assert None in columns["new_item_created_at_ts"] and any(columns["new_item_created_at_ts"])
    assert len(set(columns["event_type"])) >= 8
    wide = expected["wide"][CHANGES]["files"]
    wide_values = {name: [v for part in wide for v in part["columns"][name]] for name in wide[0]["columns"]}
    assert {True, False, None} <= set(wide_values["new_flag"])
    assert any(v is not None for v in wide_values["new_score"])
    assert any(v is not None for v in wide_values["new_version"])


def _write_expected() -> None:  # pragma: no cover - run by hand, see the module's docstring
    with tempfile.TemporaryDirectory() as folder:
        document = landed(Path(folder))
    EXPECTED.write_text(json.dumps(document, indent=None, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {EXPECTED}")


if __name__ == "__main__" and "--write" in sys.argv:
    _write_expected()

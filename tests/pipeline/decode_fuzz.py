"""The decoder's fuzzer: mutated stream records of both shapes, a reference reading, and the checks.

Used by tests/pipeline/test_decode_fuzz.py (bounded, in CI) and run longer from the command line:

    .venv/bin/python -m tests.pipeline.decode_fuzz --mutants 100000 [--seed N]

which prints its counts and exits non-zero on any failure.

A mutant is one of the fixtures' records (tests/pipeline/fixtures, adapter and raw shapes) with one to
three mutations anywhere in it, envelope fields included: a value replaced by a hostile one (numbers out
of every range, lone surrogates, deep nesting, malformed attribute values, wrong types; for the raw
shape also Decimals, datetimes, bytes, sets and non-text names), a field removed or added, a name
changed; adapter mutants are then written as JSON bytes and sometimes damaged byte-wise (invalid UTF-8,
truncation, a flipped byte).

The checks, per mutant (`check`):
- the decoder returns an event or raises `DecodeError`, nothing else;
- an event is one the reference reading here (orjson and the strict attribute-value decoder, written
  independently of `pipeline.decode`) accepts and reads the same way: id, change, position, creation
  time, keys, both images attribute by attribute, and the TTL flag;
- every event goes through the lake landing handler's, the cleanup handler's and the journal's `add`
  with no exception other than the project's terminal or retryable errors, and (`lake_tables`) its
  change rows build an Arrow table that Parquet writes.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import math
import random
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

from analytics.lake import LakeHandler, default_allow_list, open_lake
from analytics.lake._rows import ChangeBuffer
from pipeline._attribute_values import decode_image
from pipeline.decode import decode_record, decode_stream_record
from pipeline.errors import DecodeError
from pipeline.events import StreamEvent
from pipeline.journal import JournalHandler
from processors.cleanup import CleanupHandler
from schema.errors import RetryableError, TerminalError
from schema.table import Item

FIXTURES = Path(__file__).parent / "fixtures"
STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-11-30T10:00:00.000"
SHARD = "shardId-00000001732960800000-5f0e8c1a"


def _seeds(name: str) -> list[dict[str, Any]]:
    loaded = json.loads((FIXTURES / name).read_text())
    return [record for key, record in loaded.items() if not key.startswith("_")]


ADAPTER_SEEDS = _seeds("entitlements_adapter_records.json")
RAW_SEEDS = _seeds("entitlements_raw_records.json")

# -- mutations ------------------------------------------------------------------------------------------

ENVELOPE_NAMES = [
    "eventID", "eventName", "eventVersion", "eventSource", "awsRegion", "eventSourceARN", "userIdentity",
    "dynamodb", "ApproximateCreationDateTime", "Keys", "NewImage", "OldImage", "SequenceNumber",
    "SizeBytes", "StreamViewType", "type", "principalId", "Type", "PrincipalId",
]  # fmt: skip
ATTRIBUTE_NAMES = ["pk", "sk", "userId", "arrayAccountId", "status", "ttl", "createdAt", "kind", "extra"]


@dataclass(frozen=True)
class Deep:
    """A value nested `depth` levels deep, written as JSON bytes directly (no encoder nests so far)."""

    depth: int
    opener: str


def _text(rng: random.Random) -> str:
    return rng.choice(
        [
            "", "x", "\ud800", "a\udfffb", "\ud83d\ude00", "Active", "Service", "dynamodb.amazonaws.com",
            "INSERT", "MODIFY", "REMOVE", "USER#", "USER#u1", "ENTITLEMENT#a", "CLEANUP#CANCELLATION",
            "CLEANUP#STALE#a", "1", "0", "-0", "1e126", "1e-131", "9" * 39, "9" * 48, "9" * 49, "\u00b2",
            "NaN", "Infinity", "1_0", " 1", "AA==", "!!", "\x00", "\u2028",
            "1." + "0" * 42,
        ]
    )  # fmt: skip


def _number(rng: random.Random) -> Any:
    return rng.choice(
        [0, -1, 1, 2**31, 2**63, -(2**63) - 1, 2**64, 10**30, 10**400, 1772611200123, 1e308, -1e308, 0.5,
         1e-320, 4294967296000, 253402300800000, -62135596800001, True, False]
    )  # fmt: skip


def _attribute_value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(16)
    if choice == 0:
        return {"S": _text(rng)}
    if choice == 1:
        return {"N": rng.choice([_text(rng), str(_number(rng)), "1.5", "-0.00", "1E+125", "9.9E125"])}
    if choice == 2:
        return {"B": rng.choice(["AA==", "AQID", "!!", "A", "", _text(rng)])}
    if choice == 3:
        return {"SS": rng.choice([[], ["a"], ["a", "a"], ["\ud800"], [1], ["a", "b"]])}
    if choice == 4:
        return {"NS": rng.choice([[], ["1"], ["1", "1.0"], ["1e200"], ["x"], [1]])}
    if choice == 5:
        return {"BS": rng.choice([[], ["AA=="], ["AA==", "AA=="], ["!!"]])}
    if choice == 6:
        return {"BOOL": rng.choice([True, False, 1, "true", None])}
    if choice == 7:
        return {"NULL": rng.choice([True, False, None, 1])}
    if choice == 8 and depth < 40:
        return {"M": {_name(rng): _attribute_value(rng, depth + 1) for _ in range(rng.randrange(3))}}
    if choice == 9 and depth < 40:
        return {"L": [_attribute_value(rng, depth + 1) for _ in range(rng.randrange(3))]}
    if choice == 10:
        return {"S": "x", "N": "1"}
    if choice == 11:
        return {rng.choice(["Q", "s", ""]): "x"}
    if choice == 12:
        return {"M": Deep(rng.choice([31, 33, 300, 2000]), "M")}
    if choice == 13:
        return {"S": rng.choice([1, None, [], {}, True])}
    return _hostile(rng, depth + 1)


def _benign_value(rng: random.Random, depth: int = 0) -> Any:
    """A well-formed attribute value (so that mutants often still decode)."""
    choice = rng.randrange(9)
    if choice == 0:
        return {"S": rng.choice(["", "x", "Active", "Removed", "\u00e9t\u00e9", "\ud83d\ude00", "\u2028"])}
    if choice == 1:
        return {
            "N": rng.choice(["0", "-1", "1.5", "1772697600", "1772697600000", "1E+125", "-1E-130", "9" * 38])
        }
    if choice == 2:
        return {"NULL": True}
    if choice == 3:
        return {"BOOL": rng.random() < 0.5}
    if choice == 4:
        return {"SS": rng.choice([["a"], ["a", "b"], ["\u00e9"]])}
    if choice == 5:
        return {"B": rng.choice(["AA==", "AQID", ""])}
    if choice == 6:
        return {"NS": rng.choice([["1"], ["1", "2.5"]])}
    if choice == 7 and depth < 5:
        return {"M": {_name(rng): _benign_value(rng, depth + 1) for _ in range(rng.randrange(3))}}
    return {"L": [_benign_value(rng, depth + 1) for _ in range(rng.randrange(3))] if depth < 5 else []}


def _value(rng: random.Random, *, raw: bool) -> Any:
    roll = rng.random()
    if roll < 0.4:
        return _benign_value(rng)
    if roll < 0.7:
        return _attribute_value(rng)
    return _hostile(rng, raw=raw)


def _name(rng: random.Random) -> str:
    return rng.choice([*ATTRIBUTE_NAMES, _text(rng), "note\ud800", ""])


def _hostile(rng: random.Random, depth: int = 0, *, raw: bool = False) -> Any:
    choice = rng.randrange(12 if raw else 9)
    if choice == 0:
        return _text(rng)
    if choice == 1:
        return _number(rng)
    if choice == 2:
        return rng.choice([None, [], {}, [1], {"a": 1}])
    if choice == 3:
        return Deep(rng.choice([20, 300, 1030, 5000]), rng.choice("[{"))
    if choice == 4 and depth < 40:
        return _attribute_value(rng, depth)
    if choice == 5 and depth < 40:
        return {_name(rng): _attribute_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    if choice == 6:
        return {
            "type": rng.choice(["Service", 1, None]),
            "principalId": rng.choice(["dynamodb.amazonaws.com", []]),
        }
    if choice == 7:
        return rng.choice([float("inf"), float("nan"), -0.0]) if raw else rng.choice(["-0.0", 1.5])
    if choice == 8:
        return rng.choice([1.5e-7, 123.456, 1772611200.123])
    if choice == 9:
        return rng.choice(
            [Decimal("sNaN"), Decimal("NaN"), Decimal("Infinity"), Decimal("1e1000"), Decimal("1772611200.5"),
             Decimal("-1e30")]
        )  # fmt: skip
    if choice == 10:
        return rng.choice(
            [datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 1),
             datetime.max.replace(tzinfo=timezone(timedelta(hours=-23))),
             datetime.min.replace(tzinfo=timezone(timedelta(hours=23))), b"\x00\x01", bytearray(b"x")]
        )  # fmt: skip
    return rng.choice([frozenset({"a"}), ("a",), {1: "x"}, {b"k": 1}, object()])


def _containers(node: Any, found: list[Any]) -> None:
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            _containers(value, found)
    elif isinstance(node, list):
        found.append(node)
        for value in node:
            _containers(value, found)


def mutate(rng: random.Random, record: dict[str, Any], *, raw: bool) -> dict[str, Any]:
    """A deep copy of `record` with one to three mutations."""
    mutant = copy.deepcopy(record)
    for _ in range(rng.choice([1, 1, 1, 1, 2, 2, 3])):
        ddb = mutant.get("dynamodb")
        images = [ddb[n] for n in ("NewImage", "OldImage", "Keys") if isinstance(ddb, dict) and n in ddb]
        images = [image for image in images if isinstance(image, dict)]
        if images and rng.random() < 0.4:  # an attribute set, well formed, or removed: mostly decodable
            image = rng.choice(images)
            if image and rng.random() < 0.2:
                del image[rng.choice(list(image))]
            else:
                image[_name(rng)] = _benign_value(rng)
            continue
        found: list[Any] = []
        _containers(mutant, found)
        target = rng.choice(found)
        action = rng.randrange(6)
        if isinstance(target, list):
            if target and action < 3:
                target[rng.randrange(len(target))] = _hostile(rng, raw=raw)
            else:
                target.append(_hostile(rng, raw=raw))
            continue
        names = list(target)
        if action <= 1 and names:  # replace a value
            name = rng.choice(names)
            target[name] = _value(rng, raw=raw)
        elif action == 2 and names:  # remove a field
            del target[rng.choice(names)]
        elif action == 3:  # add a field, an envelope field or an attribute
            name = rng.choice([*ENVELOPE_NAMES, _name(rng)])
            target[name] = _value(rng, raw=raw)
        elif action == 4 and names:  # rename
            name = rng.choice(names)
            new_name: Any = rng.choice([_name(rng), *(([1, b"x"]) if raw else [])])
            target[new_name] = target.pop(name)
        else:  # a whole image replaced by attribute values of any kind
            target[rng.choice(["NewImage", "OldImage", "Keys", _name(rng)])] = {
                _name(rng): _value(rng, raw=raw) for _ in range(rng.randrange(4))
            }
    return mutant


_DEEP = re.compile(rb'"__deep_(\d+)_(.)__"')


def _json_default(value: Any) -> Any:
    if isinstance(value, Deep):
        return f"__deep_{value.depth}_{value.opener}__"
    raise TypeError


def to_bytes(rng: random.Random, mutant: dict[str, Any]) -> bytes:
    """An adapter mutant as the bytes a KCL record could carry, now and then damaged."""
    text = json.dumps(mutant, default=_json_default, ensure_ascii=rng.random() < 0.5)
    data = text.encode("utf-8", "surrogatepass")

    def deep(match: re.Match[bytes]) -> bytes:
        depth, opener = int(match.group(1)), match.group(2)
        if opener == b"M":
            return b'{"S":"x"}'.join([b'{"a":{"M":'] * depth) + b"{}" + b"}}" * depth
        closer = b"]" if opener == b"[" else b"}"
        inner = b"" if opener == b"[" else b'"a":'
        return (
            (opener + inner) * depth + b"1" * (opener == b"[") + b"null" * (opener == b"{") + closer * depth
        )

    data = _DEEP.sub(deep, data)
    damage = rng.randrange(20)
    if damage == 0 and data:
        index = rng.randrange(len(data))
        data = data[:index] + bytes([rng.randrange(256)]) + data[index + 1 :]
    elif damage == 1:
        data = data[: rng.randrange(len(data) + 1)]
    elif damage == 2:
        index = rng.randrange(len(data) + 1)
        data = data[:index] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf"]) + data[index:]
    return data


def _materialise(value: Any) -> Any:
    """A raw mutant's `Deep` values built as nested Python values (lists or attribute-value maps)."""
    if isinstance(value, Deep):
        node: Any = {} if value.opener != "[" else [1]
        for _ in range(value.depth):
            node = (
                {"a": {"M": node}}
                if value.opener == "M"
                else ([node] if value.opener == "[" else {"a": node})
            )
        return {"S": "x"} if value.opener == "M" and not node else node
    if isinstance(value, dict):
        return {name: _materialise(member) for name, member in value.items()}
    if isinstance(value, list):
        return [_materialise(member) for member in value]
    return value


# -- the reference reading ------------------------------------------------------------------------------


class Refused(Exception):
    pass


@dataclass(frozen=True)
class Reading:
    event_id: str
    change: str
    sequence_number: str
    created_at: datetime
    keys: dict[str, Any]
    new: dict[str, Any] | None
    old: dict[str, Any] | None
    ttl_deletion: bool


def _need(condition: bool) -> None:
    if not condition:
        raise Refused


def _valid_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _all_text_valid(value: Any) -> bool:
    if isinstance(value, str):
        return _valid_text(value)
    if isinstance(value, Mapping):
        return all(_all_text_valid(k) and _all_text_valid(v) for k, v in value.items())
    if isinstance(value, list | tuple | frozenset):
        return all(_all_text_valid(member) for member in value)
    return True


def _optional_text(record: Mapping[str, Any], name: str) -> None:
    if name in record:
        _need(type(record[name]) is str and _valid_text(record[name]))


def _image_or_none(value: Any, *, raw: bool) -> dict[str, Any] | None:
    if value is None or value == {}:
        return None
    try:
        image = decode_image(value, names_are_text=False)
    except DecodeError:
        raise Refused from None
    _need(_all_text_valid(image))
    return image


def _created(value: Any, *, raw: bool) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    try:
        if raw and isinstance(value, datetime):
            _need(value.tzinfo is not None and value.utcoffset() is not None)
            return value.astimezone(UTC)
        if raw and type(value) is Decimal:
            _need(value.is_finite())
            return epoch + timedelta(seconds=float(value))
        _need(type(value) in (int, float))
        _need(not isinstance(value, float) or math.isfinite(value))
        if raw:
            return epoch + timedelta(seconds=value)
        if type(value) is int and 0 <= value < 2**32 * 1000:
            return datetime.fromtimestamp(value / 1000, UTC)
        return epoch + (
            timedelta(milliseconds=value) if type(value) is int else timedelta(seconds=value / 1000)
        )
    except (OverflowError, ValueError):
        raise Refused from None


def reference(record: Any, *, raw: bool) -> Reading:
    """What the record says, read independently of `pipeline.decode`, or `Refused`."""
    _need(isinstance(record, Mapping) and all(type(name) is str for name in record))
    event_id = record.get("eventID")
    _need(type(event_id) is str and event_id != "" and _valid_text(event_id))
    change = record.get("eventName")
    _need(change in ("INSERT", "MODIFY", "REMOVE") and type(change) is str)
    for name in ("eventVersion", "eventSource", "awsRegion", "eventSourceARN"):
        _optional_text(record, name)
    _need(record.get("eventSourceARN", STREAM_ARN) == STREAM_ARN)
    ddb = record.get("dynamodb")
    _need(isinstance(ddb, Mapping) and all(type(name) is str for name in ddb))
    sequence = ddb.get("SequenceNumber")
    _need(type(sequence) is str and 0 < len(sequence) <= 48 and all(c in "0123456789" for c in sequence))
    if "SizeBytes" in ddb:
        _need(type(ddb["SizeBytes"]) is int and 0 <= ddb["SizeBytes"] < 2**63)
    _optional_text(ddb, "StreamViewType")
    _need("ApproximateCreationDateTime" in ddb)
    created_at = _created(ddb["ApproximateCreationDateTime"], raw=raw)
    _need("Keys" in ddb and ddb["Keys"] is not None)
    keys = _image_or_none(ddb["Keys"], raw=raw) or {}
    new = _image_or_none(ddb.get("NewImage"), raw=raw)
    old = _image_or_none(ddb.get("OldImage"), raw=raw)
    ttl_deletion = False
    identity = record.get("userIdentity")
    if identity is not None:
        _need(isinstance(identity, Mapping) and all(type(name) is str for name in identity))
        given = {n: identity[n] for n in ("type", "principalId", "Type", "PrincipalId") if n in identity}
        _need(all(v is None or (type(v) is str and _valid_text(v)) for v in given.values()))
        kind = given.get("type") if given.get("type") is not None else given.get("Type")
        principal = (
            given.get("principalId") if given.get("principalId") is not None else given.get("PrincipalId")
        )
        _need(kind is not None or principal is not None)
        ttl_deletion = change == "REMOVE" and kind == "Service" and principal == "dynamodb.amazonaws.com"
    return Reading(event_id, change, sequence, created_at, keys, new, old, ttl_deletion)


def _attributes(item: Item | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {name: value for name, value in item.attributes().items() if value is not None}


def _without_nulls(image: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if image is None else {name: value for name, value in image.items() if value is not None}


def differences(event: StreamEvent, reading: Reading) -> list[str]:
    """What the event says otherwise than the reference reading (empty: the same)."""
    got = {
        "event_id": event.event_id,
        "change": event.change.value,
        "sequence_number": event.position.sequence_number,
        "created_at": event.created_at,
        "keys": event.keys,
        "new": _attributes(event.new_item),
        "old": _attributes(event.old_item),
        "ttl_deletion": event.ttl_deletion,
    }
    expected = {
        "event_id": reading.event_id,
        "change": reading.change,
        "sequence_number": reading.sequence_number,
        "created_at": reading.created_at,
        "keys": reading.keys,
        "new": _without_nulls(reading.new),
        "old": _without_nulls(reading.old),
        "ttl_deletion": reading.ttl_deletion,
    }
    return [
        name for name in got if got[name] != expected[name] or type(got[name]) is not type(expected[name])
    ]


# -- the handlers ---------------------------------------------------------------------------------------


class _Clock:
    def now(self) -> datetime:
        return datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class _Sink:
    def add_outcome(self, outcome: Any) -> None:
        pass


class _Untouched:
    """A client `add` must never call: any attribute access fails the check."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"add() used a client ({name})")


@dataclass
class Handlers:
    root: Path
    lake: LakeHandler = field(init=False)
    cleanup: CleanupHandler = field(init=False)
    journal: JournalHandler = field(init=False)

    def __post_init__(self) -> None:
        self.lake = LakeHandler(open_lake(str(self.root / "lake")))
        self.cleanup = CleanupHandler(
            dynamodb=_Untouched(),
            sqs=_Untouched(),
            array=_Untouched(),
            table_name="entitlements",
            retry_queue_url="http://127.0.0.1:9/queue",
            sink=_Sink(),
            clock=_Clock(),
        )
        self.journal = JournalHandler(self.root / "journal.jsonl")

    def each(self) -> tuple[Any, ...]:
        return (self.lake, self.cleanup, self.journal)

    def reset(self) -> None:
        for handler in self.each():
            handler.discard_pending()


def lake_tables(events: list[StreamEvent]) -> int:
    """Build the change rows of `events` as the lake does and write them as Parquet (in memory)."""
    buffer = ChangeBuffer(default_allow_list())
    for event in events:
        buffer.append(event)
    written = 0
    for pending in buffer.files():
        pq.write_table(pending.table, io.BytesIO())
        written += 1
    return written


# -- one mutant -----------------------------------------------------------------------------------------


@dataclass
class Counts:
    by: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.by["failure"] += 1
        if len(self.failures) < 20:
            self.failures.append(what)


def check(rng: random.Random, handlers: Handlers, counts: Counts) -> StreamEvent | None:
    """Make one mutant (either shape), decode it, and check it; the event when it decoded."""
    raw = rng.random() < 0.35
    seed = rng.choice(RAW_SEEDS if raw else ADAPTER_SEEDS)
    mutant = mutate(rng, seed, raw=raw)
    shape = "raw" if raw else "adapter"
    counts.by[f"{shape} mutants"] += 1
    try:
        if raw:
            record = _materialise(mutant)
            event = decode_stream_record(record, stream_arn=STREAM_ARN, shard_id=SHARD)
        else:
            data = to_bytes(rng, mutant)
            event = decode_record(data, stream_arn=STREAM_ARN, shard_id=SHARD)
    except DecodeError:
        counts.by[f"{shape} refused (DecodeError)"] += 1
        try:  # for the record: refused although the reference reads it (stricter, never looser)
            reference(record if raw else orjson.loads(data), raw=raw)
            counts.by[f"{shape} refused, the reference reads it"] += 1
        except (Refused, orjson.JSONDecodeError):
            pass
        return None
    except Exception as error:  # the check itself: nothing else may escape
        counts.fail(f"{shape}: {type(error).__name__} from the decoder")
        return None
    counts.by[f"{shape} decoded"] += 1
    try:
        reading = reference(record if raw else orjson.loads(data), raw=raw)
    except (Refused, orjson.JSONDecodeError):
        counts.fail(f"{shape}: decoded a record the reference refuses")
        return event
    different = differences(event, reading)
    if different:
        counts.fail(f"{shape}: decoded otherwise than the reference ({', '.join(different)})")
    for handler in handlers.each():
        try:
            handler.add(event)
        except (TerminalError, RetryableError):
            counts.by[f"{handler.name} add refused (terminal/retryable)"] += 1
        except Exception as error:
            counts.fail(f"{shape}: {type(error).__name__} from {handler.name}.add")
    return event


def run(mutants: int, seed: int, root: Path, *, lake_every: int = 200) -> Counts:
    rng = random.Random(seed)
    counts = Counts()
    handlers = Handlers(root)
    decoded: list[StreamEvent] = []
    for _ in range(mutants):
        event = check(rng, handlers, counts)
        if event is not None:
            decoded.append(event)
        if len(decoded) >= lake_every:
            try:
                counts.by["lake files written"] += lake_tables(decoded)
            except Exception as error:
                counts.fail(f"{type(error).__name__} writing decoded events to the lake")
            decoded.clear()
            handlers.reset()
    if decoded:
        counts.by["lake files written"] += lake_tables(decoded)
    handlers.journal.flush()
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=20261201)
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        counts = run(arguments.mutants, arguments.seed, Path(root))
    for name, count in sorted(counts.by.items()):
        print(f"{name:48s} {count:>9,}")
    for failure in counts.failures:
        print("FAILURE:", failure)
    return 1 if counts.by["failure"] else 0


if __name__ == "__main__":
    sys.exit(main())

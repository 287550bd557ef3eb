"""A synthetic lake of any size (10 million rows in well under a minute), for benchmarks.

Users follow the service's life cycles (docs/table.md): signup; cancellation with a 63-day cleanup record;
reactivation (the service deletes the record); expiry (TTL removes the record, the row becomes Removed);
a second signup (the old row Superseded, a 1-day stale record, its expiry, the row Removed); relinks (the
same row updated). `duplicate_active_users` plants users whose second signup left two Active rows (the
fault SaveIfActive exists to prevent), for the duplicate-Active audit; their ids are returned.

Rows are built column by column with pyarrow compute (no Python loop per row), sorted by time, given
increasing sequence numbers, and written as change-log files per (day, shard) in the lake's real schema,
so everything in analytics reads them as it reads landed files.

    from analytics.lake import open_lake
    from bench._synthetic_lake import generate_lake, append_updates
    lake = open_lake("/tmp/lake10m")
    info = generate_lake(lake, rows=10_000_000, duplicate_active_users=1_000)
    append_updates(lake, info, rows=100_000)     # 1% more, later in time
"""

from __future__ import annotations

__all__ = ["STREAM_ARN", "SyntheticLake", "append_updates", "generate_lake"]

import itertools
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analytics.lake import Lake, changes_schema, default_allow_list
from analytics.lake._delta import append
from analytics.lake._files import TABLES, ensure_layout

STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"
_DAY_US = 86_400_000_000
_HOUR_US = 3_600_000_000
_SEQUENCE_BASE = "1"  # sequence numbers are "1" + 20 digits: 21 digits, as DynamoDB's are at least


@dataclass
class SyntheticLake:
    rows: int
    users: int
    shards: tuple[str, ...]
    start: datetime
    end: datetime  # the latest created_at written
    next_position: int  # the next free position for sequence numbers
    files: int
    duplicate_active_users: list[str] = field(default_factory=list)
    signup_only_users: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64), repr=False)


# A step: (item, change, event type, old status, new status, TTL removal, ttl days, gap in hours).
# Items: e0/e1 = entitlement rows for Array accounts a0/a1; c = cancellation record; s0 = stale record of a0.
_Step = tuple[str, str, str, str | None, str | None, bool, int | None, float]
_TEMPLATES: dict[str, tuple[float, tuple[_Step, ...]]] = {
    "signup": (0.30, (("e0", "INSERT", "entitlement.created", None, "Active", False, None, 0),)),
    "cancel": (
        0.15,
        (
            ("e0", "INSERT", "entitlement.created", None, "Active", False, None, 0),
            ("e0", "MODIFY", "entitlement.status_changed", "Active", "Cancelled", False, None, 240),
            ("c", "INSERT", "cleanup.scheduled", None, None, False, 63, 0.001),
        ),
    ),
    "reactivate": (
        0.15,
        (
            ("e0", "INSERT", "entitlement.created", None, "Active", False, None, 0),
            ("e0", "MODIFY", "entitlement.status_changed", "Active", "Cancelled", False, None, 240),
            ("c", "INSERT", "cleanup.scheduled", None, None, False, 63, 0.001),
            ("c", "REMOVE", "cleanup.cancelled", None, None, False, 63, 300),
            ("e0", "MODIFY", "entitlement.status_changed", "Cancelled", "Active", False, None, 0.001),
        ),
    ),
    "expire": (
        0.15,
        (
            ("e0", "INSERT", "entitlement.created", None, "Active", False, None, 0),
            ("e0", "MODIFY", "entitlement.status_changed", "Active", "Cancelled", False, None, 240),
            ("c", "INSERT", "cleanup.scheduled", None, None, False, 63, 0.001),
            ("c", "REMOVE", "cleanup.expired", None, None, True, 63, 63 * 24 + 5),
            ("e0", "MODIFY", "entitlement.status_changed", "Cancelled", "Removed", False, None, 0.01),
        ),
    ),
    "second_signup": (
        0.15,
        (
            ("e0", "INSERT", "entitlement.created", None, "Active", False, None, 0),
            ("e1", "INSERT", "entitlement.created", None, "Active", False, None, 120),
            ("e0", "MODIFY", "entitlement.status_changed", "Active", "Superseded", False, None, 0.001),
            ("s0", "INSERT", "cleanup.scheduled", None, None, False, 1, 0.001),
            ("s0", "REMOVE", "cleanup.expired", None, None, True, 1, 26),
            ("e0", "MODIFY", "entitlement.status_changed", "Superseded", "Removed", False, None, 0.01),
        ),
    ),
    "relinks": (
        0.10,
        (
            ("e0", "INSERT", "entitlement.created", None, "Active", False, None, 0),
            *(("e0", "MODIFY", "entitlement.updated", "Active", "Active", False, None, 48),) * 9,
        ),
    ),
}
_DUPLICATE: tuple[_Step, ...] = (
    ("e0", "INSERT", "entitlement.created", None, "Active", False, None, 0),
    ("e1", "INSERT", "entitlement.created", None, "Active", False, None, 120),
)
_KINDS = {"e0": "entitlement", "e1": "entitlement", "c": "cancellation", "s0": "stale"}


def _text(prefix: str, numbers: pa.Array, width: int) -> pa.Array:
    digits = pc.utf8_lpad(pc.cast(numbers, pa.string()), width=width, padding="0")
    return pc.binary_join_element_wise(pa.scalar(prefix), digits, "")


def _full(value: object, n: int, kind: pa.DataType) -> pa.Array:
    return pa.nulls(n, kind) if value is None else pa.array(np.full(n, value), kind)


_STEPS: list[_Step] = [step for _, steps in _TEMPLATES.values() for step in steps] + list(_DUPLICATE)


def _lookup(values: list[object], steps: pa.Array, kind: pa.DataType) -> pa.Array:
    """A per-step property for every row (rows carry their step id)."""
    return pa.array(values, kind).take(steps)


def _chunk_table(
    users: np.ndarray, times: np.ndarray, steps: np.ndarray, created: np.ndarray, ttls: np.ndarray
) -> dict[str, pa.Array]:
    """The change-log columns of many rows of mixed steps, built column by column."""
    n = len(users)
    step = pa.array(steps.astype(np.int32))
    item = [s[0] for s in _STEPS]
    change = _lookup([s[1] for s in _STEPS], step, pa.string())
    kind = _lookup([_KINDS[i] for i in item], step, pa.string())
    is_entitlement = _lookup([_KINDS[i] == "entitlement" for i in item], step, pa.bool_())
    has_ttl = _lookup([s[6] is not None for s in _STEPS], step, pa.bool_())
    has_old = pc.not_equal(change, "INSERT")
    has_new = pc.not_equal(change, "REMOVE")
    second = _lookup([i == "e1" for i in item], step, pa.bool_())
    user_ids = _text("u", pa.array(users), 8)
    accounts = _text("acct", pa.array(users * 2 + second.to_numpy(zero_copy_only=False)), 9)
    sk = pc.case_when(
        pc.make_struct(is_entitlement, pc.equal(kind, "stale")),
        pc.binary_join_element_wise("ENTITLEMENT#", accounts, ""),
        pc.binary_join_element_wise("CLEANUP#STALE#", accounts, ""),
        pa.scalar("CLEANUP#CANCELLATION"),
    )
    stamp_type = pa.timestamp("us", tz="UTC")
    created_at = pa.array(times, stamp_type)
    # Business-time text as the service writes it (cast: strftime with a time zone is ~10x slower).
    updated = pc.cast(pa.array(times // 1_000_000, pa.timestamp("s")), pa.string())
    made = pc.cast(pa.array(created // 1_000_000, pa.timestamp("s")), pa.string())
    ttl = pa.array(np.where(ttls < 0, 0, ttls), pa.int64())
    gsi1pk = pc.binary_join_element_wise("ARRAY#", accounts, "")
    null = pa.scalar(None, pa.string())
    columns: dict[str, pa.Array] = {
        "schema_version": pa.array(np.ones(n, np.int16)),
        "stream_arn": pa.array([STREAM_ARN]).take(pa.array(np.zeros(n, np.int32))),
        "event_type": _lookup([s[2] for s in _STEPS], step, pa.string()),
        "change_kind": change,
        "created_at": created_at,
        "ttl_deletion": _lookup([s[5] for s in _STEPS], step, pa.bool_()),
        "pk": _text("USER#u", pa.array(users), 8),
        "sk": sk,
        "item_kind": kind,
        "user_id": user_ids,
        "has_old_image": has_old,
        "has_new_image": has_new,
    }
    for side, present in (("old", has_old), ("new", has_new)):
        status = _lookup([s[3] if side == "old" else s[4] for s in _STEPS], step, pa.string())
        on_row = pc.and_(present, is_entitlement)
        on_ttl = pc.and_(present, has_ttl)
        columns[f"{side}_item_user_id"] = pc.if_else(present, user_ids, null)
        columns[f"{side}_array_account_id"] = pc.if_else(present, accounts, null)
        columns[f"{side}_item_created_at"] = pc.if_else(present, made, null)
        columns[f"{side}_status"] = pc.if_else(on_row, status, null)
        columns[f"{side}_gsi1pk"] = pc.if_else(on_row, gsi1pk, null)
        columns[f"{side}_gsi1sk"] = pc.if_else(on_row, pa.scalar("ENTITLEMENT"), null)
        columns[f"{side}_item_updated_at"] = pc.if_else(on_row, updated, null)
        columns[f"{side}_ttl"] = pc.if_else(on_ttl, ttl, pa.scalar(None, pa.int64()))
        columns[f"{side}_ttl_raw"] = pc.if_else(on_ttl, pc.cast(ttl, pa.string()), null)
        columns[f"{side}_ttl_type"] = pc.if_else(on_ttl, pa.scalar("N"), null)
        # The texts above carry no offset, so their parsed twins are NULL, as the landing makes them.
        for twin in ("item_created_at_ts", "item_updated_at_ts"):
            columns[f"{side}_{twin}"] = pa.nulls(n, pa.timestamp("us", tz="UTC"))
    return columns


@dataclass
class _Rows:
    """Rows as numbers only (a few bytes each); strings are made per file, at write time."""

    users: list[np.ndarray] = field(default_factory=list)
    times: list[np.ndarray] = field(default_factory=list)
    steps: list[np.ndarray] = field(default_factory=list)
    created: list[np.ndarray] = field(default_factory=list)
    ttls: list[np.ndarray] = field(default_factory=list)

    def add_history(
        self,
        first_step: int,
        steps: tuple[_Step, ...],
        users: np.ndarray,
        starts: np.ndarray,
        rng: np.random.Generator,
    ) -> None:
        times = starts.copy()
        made: dict[str, np.ndarray] = {}
        scheduled = np.zeros(len(users), np.int64)
        for index, step in enumerate(steps):
            if index:
                gap = step[7]  # at least this many hours, plus up to a day or so more
                jitter = gap + (rng.exponential(min(gap, 24), len(users)) if gap >= 1 else 0)
                times = times + (np.asarray(jitter) * _HOUR_US).astype(np.int64) + 1_000
            item, change, ttl_days = step[0], step[1], step[6]
            if change == "INSERT":
                made[item] = times
                if ttl_days is not None:
                    scheduled = times // 1_000_000 + ttl_days * 86_400
            self.users.append(users)
            self.times.append(times)
            self.steps.append(np.full(len(users), first_step + index, np.int16))
            self.created.append(made.get(item, times))
            self.ttls.append(scheduled if ttl_days is not None else np.full(len(users), -1, np.int64))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (
            np.concatenate(self.users),
            np.concatenate(self.times),
            np.concatenate(self.steps),
            np.concatenate(self.created),
            np.concatenate(self.ttls),
        )


def _write_rows(
    lake: Lake,
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    shards: tuple[str, ...],
    first_position: int,
    rows_per_file: int,
) -> int:
    """Rows sorted by time get sequence numbers in that order and are written per (day, shard, chunk)."""
    users, times, steps, created, ttls = arrays
    schema = changes_schema(default_allow_list())
    shard_of = (users * 2654435761) % len(shards)
    days = times // _DAY_US
    bounds = [0, *(np.flatnonzero(np.diff(days)) + 1).tolist(), len(times)]
    tasks: list[tuple[date, int, np.ndarray]] = []
    for a, b in itertools.pairwise(bounds):
        when = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(days=int(days[a]))).date()
        for shard in range(len(shards)):
            rows = a + np.flatnonzero(shard_of[a:b] == shard)
            tasks.extend(
                (when, shard, rows[i : i + rows_per_file]) for i in range(0, len(rows), rows_per_file)
            )

    def write(task: tuple[date, int, np.ndarray]) -> None:
        when, shard, chunk = task
        table = pa.table(_chunk_table(users[chunk], times[chunk], steps[chunk], created[chunk], ttls[chunk]))
        sequence = _text(_SEQUENCE_BASE, pa.array((chunk + first_position) * 7), 20)
        table = (
            table.append_column("shard_id", _full(shards[shard], table.num_rows, pa.string()))
            .append_column("sequence_number", sequence)
            .append_column("sequence_key", pc.utf8_lpad(sequence, width=48, padding="0"))
            .append_column("event_id", pc.binary_join_element_wise(pa.scalar("ev-"), sequence, ""))
            .select(schema.names)
            .cast(schema)
        )
        land_changes(lake, table, when)

    for task in tasks:  # one Delta commit per file, as the landing makes them
        write(task)
    return len(tasks)


def land_changes(lake: Lake, table: pa.Table, when: date) -> int:
    """Append `table` (changes rows of day `when`) to the lake's `changes` table as one commit."""
    delta = ensure_layout(lake, default_allow_list())["changes"]
    dated = table.append_column(
        pa.field("event_date", pa.date32()), pa.array([when] * table.num_rows, pa.date32())
    )
    return append(lake, delta, "changes", dated, partition_by=TABLES["changes"].partition_by)


def generate_lake(
    lake: Lake,
    rows: int = 10_000_000,
    *,
    seed: int = 0,
    shards: tuple[str, ...] = ("shardId-00000001700000000000-a1", "shardId-00000001700000000000-b2"),
    start: datetime = datetime(2026, 1, 1, tzinfo=UTC),
    days: int = 30,
    duplicate_active_users: int = 0,
    rows_per_file: int = 500_000,
) -> SyntheticLake:
    """Write a change log of exactly `rows` rows: the earliest of the generated histories' changes (so a
    valid table at an instant), plus every change of the planted duplicate-Active users."""
    rng = np.random.default_rng(seed)
    ensure_layout(lake, default_allow_list())
    mean = sum(weight * len(steps) for weight, steps in _TEMPLATES.values())
    users = int(rows / mean * 1.1) + 10  # a little extra: the time prefix cuts histories short
    start_us = int(start.timestamp() * 1_000_000)
    starts = start_us + rng.integers(0, days * _DAY_US, users, dtype=np.int64)
    assignment = rng.choice(len(_TEMPLATES), size=users, p=[w for w, _ in _TEMPLATES.values()])
    collected = _Rows()
    first_step = 0
    signup_only = np.empty(0, np.int64)
    for index, (name, (_, steps)) in enumerate(_TEMPLATES.items()):
        members = np.flatnonzero(assignment == index).astype(np.int64)
        if name == "signup":
            signup_only = members
        collected.add_history(first_step, steps, members, starts[members], rng)
        first_step += len(steps)
    planted = np.arange(users, users + duplicate_active_users, dtype=np.int64)
    if duplicate_active_users:
        plant_starts = start_us + rng.integers(0, days * _DAY_US // 2, duplicate_active_users, dtype=np.int64)
        collected.add_history(first_step, _DUPLICATE, planted, plant_starts, rng)
    all_users, times, steps_, created, ttls = collected.arrays()
    is_planted = all_users >= users
    order = np.argsort(times, kind="stable")
    keep_others = order[~is_planted[order]][: rows - int(is_planted.sum())]
    keep = np.concatenate([keep_others, np.flatnonzero(is_planted)])
    keep = keep[np.argsort(times[keep], kind="stable")]
    arrays = (all_users[keep], times[keep], steps_[keep], created[keep], ttls[keep])
    files = _write_rows(lake, arrays, shards, 0, rows_per_file)
    kept = np.zeros(users + duplicate_active_users, bool)
    kept[arrays[0]] = True
    return SyntheticLake(
        rows=len(keep),
        users=int(kept.sum()),
        shards=shards,
        start=start,
        end=datetime.fromtimestamp(int(arrays[1][-1]) / 1_000_000, UTC),
        next_position=len(keep),
        files=files,
        duplicate_active_users=[f"u{u:08d}" for u in planted.tolist()],
        signup_only_users=signup_only[kept[signup_only]],
    )


def append_updates(lake: Lake, info: SyntheticLake, rows: int, *, seed: int = 1) -> int:
    """Land `rows` more changes after the end (relinks of signed-up users' Active rows); returns files."""
    rng = np.random.default_rng(seed)
    users = rng.choice(info.signup_only_users, size=rows, replace=True)
    base = int(info.end.timestamp() * 1_000_000) + _HOUR_US
    times = np.sort(base + rng.integers(0, _DAY_US, rows, dtype=np.int64))
    step_id = _STEPS.index(("e0", "MODIFY", "entitlement.updated", "Active", "Active", False, None, 48))
    arrays = (users, times, np.full(rows, step_id, np.int16), times - _DAY_US, np.full(rows, -1, np.int64))
    files = _write_rows(lake, arrays, info.shards, info.next_position, rows_per_file=50_000)
    info.next_position += rows
    info.rows += rows
    info.end = datetime.fromtimestamp(int(times[-1]) / 1_000_000, UTC)
    return files

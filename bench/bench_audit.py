"""`make bench` / `python -m bench audit`: the duplicate-Active audit over a 10-million-row lake.

The figure: `entitlements audit`'s duplicate-Active check (users with more than one Active row now,
`analytics/sql/audits/duplicate_active_rows.sql`, run through `analytics.audits.run_audits` exactly as
the command runs it: a new connection, the lake's views, the check, its counts), beside DuckDB's bare
scan of the same columns of the same files (`min()` of every column the check reads: every value decoded
and looked at once, nothing grouped, joined or sorted; `count()` would not do, DuckDB answers it from the
Parquet footers). `now` is the table's state: the lake's own snapshot of the
10-million-row change log (`analytics.lake.snapshots`, timed and printed too), which is what the command
reads when a snapshot is current. The audit must find exactly the planted users. Target: <= 1.5x,
both alone and beside one CPU burner (a busy loop; the audit and its baseline both measured beside it).

The lake is written here, lean (a few hundred MB of memory): each user's history is generated as integers
(user, step, time), sorted by time once, and only one day's rows at a time are turned into the lake's string
columns and written, one file per (day, shard), in the lake's real schema. Users follow the service's life
cycles (docs/table.md): signups, cancellations (63-day record), reactivations, expiries (the row Removed),
second signups (old row Superseded, 1-day stale record, its expiry), relinks; `PLANTED` users end with two
Active rows, and the audit must find exactly them.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analytics.audits import AuditConfig, AuditParameters, run_audits
from analytics.lake import Lake, changes_schema, default_allow_list, open_lake
from analytics.lake._files import ensure_layout
from analytics.lake.snapshots import snapshot, snapshot_info
from bench._report import Comparison, best_of, burners, print_figures
from bench._synthetic_lake import land_changes

ROWS = 10_000_000
PLANTED = 1_000
CHECK = "duplicate_active_rows"
TARGET = 1.5  # the audit at most 1.5x the bare scan (issue 22 item 6)
BURNERS = 1
STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"
SHARDS = ("shardId-00000001700000000000-a1", "shardId-00000001700000000000-b2")
_START = datetime(2026, 1, 1, tzinfo=UTC)
_DAYS = 30
_HOUR_US = 3_600_000_000
_DAY_US = 24 * _HOUR_US

# A step: (item, change, event type, old status, new status, ttl deletion, ttl days, mean gap in hours).
# Items: e0/e1 entitlement rows (Array accounts 2u and 2u+1), c the cancellation record, s0 the stale
# record of account 2u.
_Step = tuple[str, str, str, str | None, str | None, bool, int | None, float]
_CREATE: _Step = ("e0", "INSERT", "entitlement.created", None, "Active", False, None, 0.0)
_CANCEL: tuple[_Step, ...] = (
    ("e0", "MODIFY", "entitlement.status_changed", "Active", "Cancelled", False, None, 240.0),
    ("c", "INSERT", "cleanup.scheduled", None, None, False, 63, 0.0),
)
_TEMPLATES: dict[str, tuple[float, tuple[_Step, ...]]] = {
    "signup": (0.30, (_CREATE,)),
    "cancel": (0.15, (_CREATE, *_CANCEL)),
    "reactivate": (
        0.15,
        (
            _CREATE,
            *_CANCEL,
            ("c", "REMOVE", "cleanup.cancelled", None, None, False, 63, 300.0),
            ("e0", "MODIFY", "entitlement.status_changed", "Cancelled", "Active", False, None, 0.0),
        ),
    ),
    "expire": (
        0.15,
        (
            _CREATE,
            *_CANCEL,
            ("c", "REMOVE", "cleanup.expired", None, None, True, 63, 63 * 24.0),
            ("e0", "MODIFY", "entitlement.status_changed", "Cancelled", "Removed", False, None, 0.0),
        ),
    ),
    "second_signup": (
        0.15,
        (
            _CREATE,
            ("e1", "INSERT", "entitlement.created", None, "Active", False, None, 120.0),
            ("e0", "MODIFY", "entitlement.status_changed", "Active", "Superseded", False, None, 0.0),
            ("s0", "INSERT", "cleanup.scheduled", None, None, False, 1, 0.0),
            ("s0", "REMOVE", "cleanup.expired", None, None, True, 1, 26.0),
            ("e0", "MODIFY", "entitlement.status_changed", "Superseded", "Removed", False, None, 0.0),
        ),
    ),
    "relinks": (
        0.10,
        (_CREATE, *(("e0", "MODIFY", "entitlement.updated", "Active", "Active", False, None, 48.0),) * 9),
    ),
}
# What SaveIfActive exists to prevent: a second Active row, the first never retired.
_PLANTED_STEPS: tuple[_Step, ...] = (
    _CREATE,
    ("e1", "INSERT", "entitlement.created", None, "Active", False, None, 120.0),
)
_KINDS = {"e0": "entitlement", "e1": "entitlement", "c": "cancellation", "s0": "stale"}


@dataclass(frozen=True)
class BenchLake:
    lake: Lake
    rows: int
    users: int
    files: int
    planted_users: frozenset[str]
    seconds: float


def _steps() -> list[_Step]:
    return [step for _, steps in _TEMPLATES.values() for step in steps] + list(_PLANTED_STEPS)


def _histories(
    rows: int, planted: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.int64]:
    """(user, global step id, time in µs, time the step's item was created in µs), `rows` rows plus
    every planted user's rows, as plain integer arrays."""
    mean = sum(weight * len(steps) for weight, steps in _TEMPLATES.values())
    users = int(rows / mean * 1.15) + 10
    starts = _START_US + rng.integers(0, _DAYS * _DAY_US, users, dtype=np.int64)
    templates = rng.choice(len(_TEMPLATES), size=users, p=[w for w, _ in _TEMPLATES.values()])
    parts: list[tuple[np.ndarray, ...]] = []
    step_base = 0
    all_templates = [*(steps for _, steps in _TEMPLATES.values()), _PLANTED_STEPS]
    for index, steps in enumerate(all_templates):
        if index < len(_TEMPLATES):
            members = np.flatnonzero(templates == index).astype(np.int64)
            times = starts[members].copy()
        else:
            members = np.arange(users, users + planted, dtype=np.int64)
            times = _START_US + rng.integers(0, _DAYS * _DAY_US // 2, planted, dtype=np.int64)
        created: dict[str, np.ndarray] = {}
        for offset, step in enumerate(steps):
            if offset:
                gap = step[7]
                jitter = rng.exponential(gap, len(members)) if gap >= 1 else np.zeros(len(members))
                times = times + (jitter * _HOUR_US).astype(np.int64) + 1_000
            item = step[0]
            if step[1] == "INSERT":
                created[item] = times
            parts.append((members, np.full(len(members), step_base + offset, np.int16), times, created[item]))
        step_base += len(steps)
    user = np.concatenate([p[0] for p in parts])
    step_id = np.concatenate([p[1] for p in parts])
    at = np.concatenate([p[2] for p in parts])
    born = np.concatenate([p[3] for p in parts])
    order = np.argsort(at, kind="stable")
    user, step_id, at, born = user[order], step_id[order], at[order], born[order]
    # Keep every planted row, and the earliest others up to `rows`.
    keep = user >= users
    others = np.flatnonzero(~keep)[: rows - int(keep.sum())]
    keep[others] = True
    return user[keep], step_id[keep], at[keep], born[keep], np.int64(users)


_START_US = int(_START.timestamp() * 1_000_000)


def _text(prefix: str, numbers: np.ndarray, width: int) -> pa.Array:
    digits = pc.utf8_lpad(pc.cast(pa.array(numbers), pa.string()), width=width, padding="0")
    return pc.binary_join_element_wise(pa.scalar(prefix), digits, "")


def _stamp(micros: np.ndarray) -> pa.Array:
    """Business time as the service writes it (`2026-01-31T12:00:00Z`); a cast, not strftime (10x)."""
    text = pc.cast(pa.array(micros // 1_000_000, pa.timestamp("s")), pa.string())
    return pc.binary_join_element_wise(pc.replace_substring(text, " ", "T"), pa.scalar("Z"), "")


def _by_step(values: list[object], kind: pa.DataType, step_id: np.ndarray) -> pa.Array:
    return pa.array(values, kind).take(pa.array(step_id))


def _day_table(
    *,
    user: np.ndarray,
    step_id: np.ndarray,
    at: np.ndarray,
    born: np.ndarray,
    seq: np.ndarray,
    schema: pa.Schema,
) -> pa.Table:
    steps = _steps()
    n = len(user)
    item = [s[0] for s in steps]
    kind = _by_step([_KINDS[i] for i in item], pa.string(), step_id)
    change = _by_step([s[1] for s in steps], pa.string(), step_id)
    is_entitlement = pc.equal(kind, "entitlement")
    account_number = user * 2 + np.array([1 if i == "e1" else 0 for i in item], np.int64)[step_id]
    accounts = _text("acct", account_number, 9)
    sk_prefix = _by_step(
        ["ENTITLEMENT#" if _KINDS[i] == "entitlement" else "CLEANUP#STALE#" for i in item],
        pa.string(),
        step_id,
    )
    sk = pc.if_else(
        pc.equal(kind, "cancellation"),
        pa.scalar("CLEANUP#CANCELLATION"),
        pc.binary_join_element_wise(sk_prefix, accounts, ""),
    )
    user_ids = _text("u", user, 8)
    created = pa.array(at, pa.timestamp("us", tz="UTC"))
    born_text = _stamp(born)
    stamp = _stamp(at)
    ttl_days = np.array([s[6] or 0 for s in steps], np.int64)[step_id]
    ttl = pa.array(born // 1_000_000 + ttl_days * 86_400, mask=ttl_days == 0)
    sequence = _text("1", seq, 20)
    columns: dict[str, pa.Array] = {
        "schema_version": pa.array(np.ones(n, np.int16)),
        "stream_arn": pa.array([STREAM_ARN], pa.string()).take(pa.array(np.zeros(n, np.int64))),
        "shard_id": pa.array(SHARDS, pa.string()).take(pa.array((user * 2654435761) % len(SHARDS))),
        "sequence_number": sequence,
        "sequence_key": pc.utf8_lpad(sequence, width=48, padding="0"),
        "event_id": pc.binary_join_element_wise(pa.scalar("ev-"), sequence, ""),
        "event_type": _by_step([s[2] for s in steps], pa.string(), step_id),
        "change_kind": change,
        "created_at": created,
        "ttl_deletion": _by_step([s[5] for s in steps], pa.bool_(), step_id),
        "pk": _text("USER#u", user, 8),
        "sk": sk,
        "item_kind": kind,
        "user_id": user_ids,
        "has_old_image": pc.not_equal(change, "INSERT"),
        "has_new_image": pc.not_equal(change, "REMOVE"),
    }
    null_string = pa.nulls(n, pa.string())
    for side, present in (("old", pc.not_equal(change, "INSERT")), ("new", pc.not_equal(change, "REMOVE"))):
        status = _by_step([s[3] if side == "old" else s[4] for s in steps], pa.string(), step_id)
        gsi = pc.binary_join_element_wise(pa.scalar("ARRAY#"), accounts, "")
        columns[f"{side}_item_user_id"] = pc.if_else(present, user_ids, null_string)
        columns[f"{side}_array_account_id"] = pc.if_else(present, accounts, null_string)
        columns[f"{side}_status"] = status
        columns[f"{side}_item_created_at"] = pc.if_else(present, born_text, null_string)
        columns[f"{side}_item_updated_at"] = pc.if_else(pc.and_(present, is_entitlement), stamp, null_string)
        columns[f"{side}_gsi1pk"] = pc.if_else(pc.and_(present, is_entitlement), gsi, null_string)
        columns[f"{side}_gsi1sk"] = pc.if_else(
            pc.and_(present, is_entitlement), pa.scalar("ENTITLEMENT"), null_string
        )
        side_ttl = pc.if_else(present, ttl, pa.nulls(n, pa.int64()))
        columns[f"{side}_ttl"] = side_ttl
        columns[f"{side}_ttl_raw"] = pc.cast(side_ttl, pa.string())
        columns[f"{side}_ttl_type"] = pc.if_else(pc.is_valid(side_ttl), pa.scalar("N"), null_string)
    return pa.table(
        {name: columns.get(name, pa.nulls(n, schema.field(name).type)) for name in schema.names},
        schema=schema,
    )


def build_lake(root: str, rows: int = ROWS, planted: int = PLANTED, seed: int = 0) -> BenchLake:
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    lake = open_lake(root)
    allow = default_allow_list()
    ensure_layout(lake, allow)
    schema = changes_schema(allow)
    user, step_id, at, born, first_planted = _histories(rows, planted, rng)
    seq = np.arange(len(user), dtype=np.int64) * 7 + 1
    shard = (user * 2654435761) % len(SHARDS)
    day = at // _DAY_US
    files = 0
    boundaries = np.flatnonzero(np.diff(day)) + 1
    for lo, hi in zip(np.r_[0, boundaries], np.r_[boundaries, len(day)], strict=True):
        when = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(days=int(day[lo]))).date()
        for s in range(len(SHARDS)):
            index = lo + np.flatnonzero(shard[lo:hi] == s)
            if not len(index):
                continue
            table = _day_table(
                user=user[index],
                step_id=step_id[index],
                at=at[index],
                born=born[index],
                seq=seq[index],
                schema=schema,
            )
            land_changes(lake, table, when)
            files += 1
    planted_users = frozenset(f"u{u:08d}" for u in range(int(first_planted), int(first_planted) + planted))
    return BenchLake(
        lake=lake,
        rows=len(user),
        users=int(first_planted) + planted,
        files=files,
        planted_users=planted_users,
        seconds=time.perf_counter() - started,
    )


def _bare_scan_sql(lake: Lake, columns: list[str]) -> str:
    info = snapshot_info(lake)
    assert info is not None
    files = ", ".join(f"'{lake.uri_for(path)}'" for path in info.state_files)
    touched = ", ".join(f"min({c})" for c in columns)
    return f"SELECT {touched} FROM read_parquet([{files}])"


def main() -> None:
    config = AuditConfig(parameters=AuditParameters(max_rows=10 * PLANTED))
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as root:
        built = build_lake(f"{root}/lake")
        print(
            f"\n(lake: {built.rows:,} change rows, {built.users:,} users, {built.files} files, "
            f"written in {built.seconds:.1f} s)"
        )
        started = time.perf_counter()
        snapshot(built.lake)
        print(f"(the lake's snapshot of it: {time.perf_counter() - started:.1f} s)")

        def audit() -> None:
            report = run_audits(built.lake, config, checks=[CHECK])
            result = report.result(CHECK)
            assert report.source == "snapshot"
            assert (result.groups, result.surplus_rows, result.rows_involved) == (
                PLANTED,
                PLANTED,
                2 * PLANTED,
            )
            assert {row["user_id"] for row in result.rows} == built.planted_users

        # The columns the check reads: its SELECT list, and what the views filter on.
        columns = [
            "user_id", "array_account_id", "status", "item_created_at", "item_updated_at", "pk", "sk",
            "changed_at", "event_id", "item_kind", "deleted",
        ]  # fmt: skip
        con = duckdb.connect()
        con.execute("SET enable_progress_bar = false")
        scan = _bare_scan_sql(built.lake, columns)

        def bare_scan() -> None:
            con.sql(scan).to_arrow_table()

        # Alone, then beside a burner (a busy loop on one of the cores): the audit and its baseline
        # each time in the same conditions, so each ratio compares like with like.
        alone = (best_of(3, audit), best_of(3, bare_scan), _load())
        with burners(BURNERS):
            beside = (best_of(3, audit), best_of(3, bare_scan), _load())
        con.close()
    print_figures(
        f"Audit: duplicate Active rows over a {built.rows:,}-row lake ({built.files} files), alone and "
        f"beside {BURNERS} CPU burner",
        [_figure("alone", *alone), _figure(f"beside {BURNERS} CPU burner", *beside)],
    )


def _load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def _figure(where: str, audit_seconds: float, scan_seconds: float, load: str) -> Comparison:
    return Comparison(
        name=f"duplicate-Active audit, {where} ({PLANTED:,} planted users found; load {load} after it)",
        value=audit_seconds,
        unit="s",
        baseline_name="DuckDB bare scan of the same columns",
        baseline_value=scan_seconds,
        better="lower",
        target=f"ratio <= {TARGET:g}",
        met=audit_seconds <= TARGET * scan_seconds,
    )


if __name__ == "__main__":
    main()

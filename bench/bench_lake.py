"""`make bench` / `python -m bench lake`: the lake's landing, snapshots and landing memory.

- Landing throughput: typed events through the LakeHandler into zstd Parquet (events/s), beside a bare
  pyarrow write of the same rows (Python column lists -> Arrow table -> Parquet).
- Snapshots: an incremental snapshot of 1% new changes on a 10-million-row change log, beside a full
  rebuild of the same log (target <= 0.02x, what the incremental snapshot reached before the Delta tables).
- Landing memory: the handler's peak RSS growth over a short and a long run, each in a fresh process;
  it must not grow with the run's length (target <= 1.25x). Each run's process gets the Arrow memory
  pool a KCL child gets from the daemon (`config.arrow_environment`, jemalloc by default), short and long
  alike; the landing throughput runs in the bench's own process, on whatever pool it started with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import psutil  # type: ignore[import-untyped]  # the venv has no types-psutil
import pyarrow as pa
import pyarrow.parquet as pq

from analytics.lake import LakeHandler, changes_schema, default_allow_list, open_lake
from analytics.lake._delta import active_files, open_table
from analytics.lake._files import ensure_layout
from analytics.lake.snapshots import snapshot
from bench._report import Comparison, best_of, print_figures
from bench._synthetic_lake import STREAM_ARN, append_updates, generate_lake
from config import LakeSettings, arrow_environment
from pipeline import (
    ChangeKind,
    CleanupExpired,
    CleanupScheduled,
    EntitlementCreated,
    EntitlementStatusChanged,
    StreamEvent,
    StreamPosition,
)
from schema.table import CleanupRecord, EntitlementRow, ItemKind

LANDING_EVENTS = 300_000
LANDING_RUNS = 3
SHORT_RUN, LONG_RUN = 100_000, 1_000_000
SNAPSHOT_ROWS = 10_000_000
SHARD = "shardId-00000001700000000000-a1"


def _pool(size: int = 1_000) -> list[StreamEvent]:
    """Distinct typed events of the four commonest kinds (each with a processor token to drop)."""
    events: list[StreamEvent] = []
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(size):
        user, account = f"u{i:07d}", f"acct{i:08d}"
        keys = {"pk": f"USER#{user}", "sk": f"ENTITLEMENT#{account}"}
        row = EntitlementRow(
            pk=keys["pk"], sk=keys["sk"], userId=user, arrayAccountId=account, status="Active",
            createdAt=start.isoformat(), updatedAt=start.isoformat(), processorToken=f"ptok-{i}",
            gsi1pk=f"ARRAY#{account}", gsi1sk="ENTITLEMENT",
        )  # fmt: skip
        position = StreamPosition(
            stream_arn=STREAM_ARN, shard_id="shardId-1", sequence_number=str(10**20 + i)
        )
        common: dict[str, Any] = {
            "event_id": f"e{i}", "position": position, "created_at": start + timedelta(seconds=i),
            "user_id": user,
        }  # fmt: skip
        kind = i % 4
        if kind == 0:
            events.append(
                EntitlementCreated(
                    **common,
                    change=ChangeKind.INSERT,
                    keys=keys,
                    item_kind=ItemKind.ENTITLEMENT,
                    new_item=row,
                )
            )
        elif kind == 1:
            cancelled = msgspec.structs.replace(row, status="Cancelled")
            events.append(
                EntitlementStatusChanged(
                    **common,
                    change=ChangeKind.MODIFY,
                    keys=keys,
                    item_kind=ItemKind.ENTITLEMENT,
                    old_item=row,
                    new_item=cancelled,
                    from_status="Active",
                    to_status="Cancelled",
                )
            )
        else:
            ckeys = {"pk": keys["pk"], "sk": "CLEANUP#CANCELLATION"}
            record = CleanupRecord(
                kind=ItemKind.CANCELLATION,
                pk=ckeys["pk"],
                sk=ckeys["sk"],
                userId=user,
                arrayAccountId=account,
                ttl=1_770_000_000 + i,
            )
            if kind == 2:
                events.append(
                    CleanupScheduled(
                        **common,
                        change=ChangeKind.INSERT,
                        keys=ckeys,
                        item_kind=ItemKind.CANCELLATION,
                        new_item=record,
                    )
                )
            else:
                events.append(CleanupExpired(
                    **common, change=ChangeKind.REMOVE, keys=ckeys, item_kind=ItemKind.CANCELLATION,
                    old_item=record))  # fmt: skip
    return events


def _events(count: int, pool: list[StreamEvent]) -> Iterator[StreamEvent]:
    """`count` distinct events (fresh positions and times), made lazily from the pool."""
    start = datetime(2026, 2, 1, tzinfo=UTC)
    for i in range(count):
        template = pool[i % len(pool)]
        position = StreamPosition(
            stream_arn=STREAM_ARN, shard_id="shardId-1", sequence_number=str(10**20 + i)
        )
        yield msgspec.structs.replace(
            template, position=position, event_id=f"ev{i}", created_at=start + timedelta(milliseconds=i)
        )


def _landing() -> list[Comparison]:
    pool = _pool()
    events = list(_events(LANDING_EVENTS, pool))
    with tempfile.TemporaryDirectory() as root:
        # Each timed run lands into a lake of its own, made (tables created) before the timing: into
        # one lake, the second and third runs were replays, every row looked up and dropped, and the
        # best of three could be a run that wrote nothing.
        lakes = [open_lake(os.path.join(root, f"lake-{n}")) for n in range(LANDING_RUNS)]
        for made in lakes:
            ensure_layout(made, default_allow_list())
        unused, lake = iter(lakes), lakes[0]

        def land() -> None:
            handler = LakeHandler(next(unused), LakeSettings(flush_rows=50_000, flush_seconds=3600))
            for event in events:
                handler.add(event)
            handler.flush()

        landing_seconds = best_of(LANDING_RUNS, land)
        files = [f"changes/{path}" for path, _ in active_files(open_table(lake, "changes"))]
        schema = changes_schema(default_allow_list())
        landed = pa.concat_tables([pq.read_table(lake.path(f)) for f in files]).select(schema.names)
        columns = landed.to_pydict()  # the same rows as Python column lists
        target = os.path.join(root, "bare.parquet")

        def bare() -> None:
            pq.write_table(pa.table(columns, schema=schema), target, compression="zstd")

        bare_seconds = best_of(3, bare)
    print(f"  landing: {LANDING_EVENTS:,} events -> {len(files)} files")
    assert landed.num_rows == LANDING_EVENTS, "a timed run landed another number of rows"
    handler_rate, bare_rate = LANDING_EVENTS / landing_seconds, landed.num_rows / bare_seconds
    return [
        Comparison(
            name="landing throughput (LakeHandler: typed events -> zstd Parquet)",
            value=handler_rate,
            unit="events/s",
            baseline_name="bare pyarrow write of the same rows (column lists -> Parquet)",
            baseline_value=bare_rate,
            target="ratio >= 0.5",
            met=handler_rate / bare_rate >= 0.5,
        )
    ]


def memory_child(count: int) -> None:
    """Run in a fresh process: peak RSS growth (MB) of landing `count` events; prints JSON."""
    pool = _pool()
    process = psutil.Process()
    with tempfile.TemporaryDirectory() as root:
        lake = open_lake(os.path.join(root, "lake"))
        handler = LakeHandler(lake, LakeSettings(flush_rows=50_000, flush_seconds=3600))
        for event in _events(60_000, pool):  # warm up: imports, Arrow pools, one written file
            handler.add(event)
        handler.flush()
        baseline = process.memory_info().rss
        peak = [baseline]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], process.memory_info().rss)
                time.sleep(0.002)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for event in _events(count, pool):
            handler.add(event)
        handler.flush()
        done.set()
        sampler.join()
        peak[0] = max(peak[0], process.memory_info().rss)
    print(json.dumps({"events": count, "peak_growth_mb": (peak[0] - baseline) / 2**20}))


def _memory_run(count: int) -> float:
    code = f"from bench.bench_lake import memory_child; memory_child({count})"
    env = {**os.environ, **arrow_environment(LakeSettings())}  # as the daemon starts a child
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=os.getcwd(), env=env
    )
    return float(json.loads(result.stdout.strip().splitlines()[-1])["peak_growth_mb"])


def _memory() -> list[Comparison]:
    short = _memory_run(SHORT_RUN)
    long = _memory_run(LONG_RUN)
    ratio = long / short if short else float("inf")
    return [
        Comparison(
            name=f"landing peak RSS growth, long run ({LONG_RUN:,} events, flush_rows 50,000)",
            value=long,
            unit="MB",
            baseline_name=f"short run ({SHORT_RUN:,} events)",
            baseline_value=short,
            better="lower",
            target="ratio <= 1.25",
            met=ratio <= 1.25,
        )
    ]


def _snapshots() -> list[Comparison]:
    with tempfile.TemporaryDirectory() as root:
        lake = open_lake(os.path.join(root, "lake"))
        started = time.perf_counter()
        info = generate_lake(lake, rows=SNAPSHOT_ROWS)
        generated = time.perf_counter() - started
        shape = f"{info.rows:,} rows, {info.users:,} users, {info.files} files"
        print(f"  synthetic lake: {shape} (made in {generated:.0f} s)")
        # The baseline: a full rebuild, which is also the snapshot the incremental run starts from.
        started = time.perf_counter()
        full_result = snapshot(lake, full=True)
        full = time.perf_counter() - started
        new_rows = SNAPSHOT_ROWS // 100
        append_updates(lake, info, rows=new_rows)
        started = time.perf_counter()
        result = snapshot(lake)
        incremental = time.perf_counter() - started
        assert result.rows_read == new_rows and not result.full and not result.consolidated
    print(
        f"  full rebuild: {full_result.rows_read:,} rows folded into {full_result.rows_written:,} items; "
        f"incremental: {result.files_read} new files, {result.rows_read:,} rows folded"
    )
    ratio = incremental / full
    return [
        Comparison(
            name=f"incremental snapshot (1% new: {new_rows:,} changes on {SNAPSHOT_ROWS:,} rows)",
            value=incremental,
            unit="s",
            baseline_name=f"full rebuild ({full_result.rows_read:,} rows)",
            baseline_value=full,
            better="lower",
            target="ratio <= 0.02",
            met=ratio <= 0.02,
        )
    ]


def main() -> None:
    print("\n== lake (bench/bench_lake.py)")
    landing = _landing()
    print_figures("lake: landing", landing)
    snapshots = _snapshots()
    print_figures("lake: snapshots", snapshots)
    memory = _memory()
    print_figures("lake: landing memory", memory)


if __name__ == "__main__":
    main()

"""`make bench` / `python -m bench lake_commits`: what one Delta table's log serves, and whether commit
time stays flat under the shipped maintenance cadence (analytics/lake/maintenance.py, LakeSettings).

- 8 writer PROCESSES (as the MultiLangDaemon runs one Python child per shard) appending 500-row commits
  through the landing's `append` to one `changes` table on moto's S3 (moto in its own process, loopback
  only): commits/s beside one writer process alone in the same run, and the shards that rate serves at
  the consumer's shipped commit interval (ConsumerSettings.commit_interval_seconds) against 64. Every
  committed row is counted back from the table: a writer that fails, or a row lost, ends the bench with
  exit status 1.
- Commit time at the 10th vs the 1,000th commit (8 shards taking turns, local disk) with the maintenance
  runner at the shipped cadence (checkpoints every `checkpoint_interval`, compaction every
  `compact_every_commits`): the median of the 10 commits just BEFORE the 1,000th, the point of the cycle
  furthest from the last compaction, beside the median of commits 1 to 10 of a fresh table made at
  that moment, its commits interleaved with them (the same load for both; target within 1.5x).
- Files per shard in the day's partition after those 1,000 commits and a last maintenance step (<= 100).
- The design that serves 64 shards (docs/architecture.md, "Commits at scale"): 8 worker writer
  processes (`analytics.lake.worker_writer`, one per KCL worker as the daemon runs them), each fed by 8
  children (threads of a feeder process of its own, over the writer's socket) flushing 500 rows every
  shipped commit interval, all on one moto-S3 table: commits/s, the flush answer time against the
  interval (a shard is served when its flush is answered before its next is due), and every row
  counted back. Its limit: the 64 children are threads of 8 processes, not 64 processes, so their
  own CPU is less than the real children's; the writers' is the real one.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
import traceback
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
from deltalake import DeltaTable

from analytics import MaintenancePolicy, MaintenanceRunner, WorkerWriter, WorkerWriterClient
from analytics.lake import Lake, changes_schema, default_allow_list, open_lake
from analytics.lake._delta import active_files, append, open_table
from analytics.lake._files import TABLES, ensure_layout
from analytics.lake._rows import PendingFile
from bench._moto import REGION, moto_server
from bench._report import Comparison, print_figures
from config import ConsumerSettings, LakeSettings

WRITERS = 8
ROWS_PER_COMMIT = 500
WRITE_SECONDS = float(os.environ.get("BENCH_LAKE_COMMITS_SECONDS", "20"))
SHARDS_TARGET = 64
COMMITS = 1_000
TURN_SHARDS = 8
_DAY = date(2026, 1, 1)
_KEYS = ("testing", "testing")


def _rows(shard: str, first: int, count: int) -> pa.Table:
    """`count` change rows of `shard` in the lake's real schema (values filler, identities unique)."""
    schema = changes_schema(default_allow_list())
    numbers = [f"{first + i:021d}" for i in range(count)]
    columns: dict[str, pa.Array] = {}
    for f in schema:
        if f.name == "sequence_key":  # the landing's key: the number padded to 48 digits
            columns[f.name] = pa.array([n.rjust(48, "0") for n in numbers], f.type)
        elif f.name in ("sequence_number", "event_id"):
            columns[f.name] = pa.array(numbers, f.type)
        elif f.name == "shard_id":
            columns[f.name] = pa.array([shard] * count, f.type)
        elif f.nullable:
            columns[f.name] = pa.nulls(count, f.type)
        elif pa.types.is_string(f.type):
            columns[f.name] = pa.array(["x"] * count, f.type)
        elif pa.types.is_boolean(f.type):
            columns[f.name] = pa.array([False] * count, f.type)
        elif pa.types.is_timestamp(f.type):
            columns[f.name] = pa.array([datetime(2026, 1, 1, tzinfo=UTC)] * count, f.type)
        else:
            columns[f.name] = pa.array([1] * count, f.type)
    table = pa.table(columns, schema=schema)
    return table.append_column(pa.field("event_date", pa.date32()), pa.array([_DAY] * count, pa.date32()))


def _s3_lake(endpoint: str, root: str) -> Lake:
    return open_lake(root, endpoint_url=endpoint, region=REGION, access_key=_KEYS[0], secret_key=_KEYS[1])


def _writer(job: tuple[str, str, int, float, float], out: Any) -> None:
    """One writer process: 500-row commits from `start_at` for `seconds`; reports (commits, rows)."""
    endpoint, root, index, start_at, seconds = job
    try:
        lake = _s3_lake(endpoint, root)
        table = open_table(lake, "changes")
        assert table is not None
        shard = f"shardId-{index:08d}"
        commits = 0
        time.sleep(max(0.0, start_at - time.time()))
        ends = time.time() + seconds
        while time.time() < ends:
            data = _rows(shard, commits * ROWS_PER_COMMIT, ROWS_PER_COMMIT)
            append(lake, table, "changes", data, partition_by=TABLES["changes"].partition_by)
            commits += 1
        out.put((index, commits, commits * ROWS_PER_COMMIT, None))
    except BaseException as error:  # a writer's failure must fail the bench
        out.put((index, 0, 0, "".join(traceback.format_exception(error))))
        raise


class BenchProcesses:
    """Writer processes whose failure (an exception, a non-zero exit, no report) ends the bench with exit
    status 1, as `BenchThreads` does for threads."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("spawn")
        self.queue = self._context.Queue()
        self._processes: list[Any] = []

    def start(self, job: tuple[str, str, int, float, float]) -> None:
        process = self._context.Process(target=_writer, args=(job, self.queue))
        process.start()
        self._processes.append(process)

    def results(self, timeout: float) -> list[tuple[int, int, int]]:
        reports: dict[int, tuple[int, int, str | None]] = {}
        deadline = time.time() + timeout
        while len(reports) < len(self._processes) and time.time() < deadline:
            try:
                index, commits, rows, failure = self.queue.get(timeout=max(0.1, deadline - time.time()))
            except Exception:  # queue.Empty: the deadline passed
                break
            reports[index] = (commits, rows, failure)
        failed = []
        for index, process in enumerate(self._processes):
            process.join(max(0.1, deadline - time.time()))
            if process.is_alive():
                process.kill()
                failed.append(f"writer {index} still running")
            elif process.exitcode != 0:
                failed.append(f"writer {index} exited {process.exitcode}")
        for index, (_, _, failure) in sorted(reports.items()):
            if failure:
                failed.append(f"writer {index} raised")
                print(failure, file=sys.stderr)
        missing = set(range(len(self._processes))) - set(reports)
        failed += [f"writer {index} reported nothing" for index in sorted(missing)]
        if failed:
            for line in failed:
                print(f"bench writer failed: {line}", file=sys.stderr)
            raise SystemExit(1)
        return [(index, commits, rows) for index, (commits, rows, _) in sorted(reports.items())]


def _commit_rate(endpoint: str, writers: int, seconds: float) -> tuple[float, int, int]:
    """Commits/s of `writers` processes on a fresh table; (rate, rows committed, rows in the table)."""
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=_KEYS[0],
        aws_secret_access_key=_KEYS[1],
    )
    bucket = f"commits-{writers}-{os.getpid()}"
    client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    root = f"s3://{bucket}/lake"
    ensure_layout(_s3_lake(endpoint, root), default_allow_list())
    processes = BenchProcesses()
    start_at = time.time() + 8.0  # every process imported and connected before the clock starts
    for index in range(writers):
        processes.start((endpoint, root, index, start_at, seconds))
    reports = processes.results(timeout=seconds + 180)
    commits = sum(c for _, c, _ in reports)
    rows = sum(r for _, _, r in reports)
    table = open_table(_s3_lake(endpoint, root), "changes")
    assert table is not None
    in_table = table.to_pyarrow_dataset().count_rows()
    return commits / seconds, rows, in_table


def _log_serves() -> list[Comparison]:
    interval = ConsumerSettings().commit_interval_seconds
    with moto_server() as endpoint:
        alone, alone_rows, alone_table = _commit_rate(endpoint, 1, WRITE_SECONDS)
        together, rows, in_table = _commit_rate(endpoint, WRITERS, WRITE_SECONDS)
    print(f"  rows committed {alone_rows:,} and {rows:,}; in the tables {alone_table:,} and {in_table:,}")
    if (alone_rows, rows) != (alone_table, in_table):
        print("bench: rows committed and rows in the table differ (lost or doubled)", file=sys.stderr)
        raise SystemExit(1)
    served = together * interval
    return [
        Comparison(
            name=f"{WRITERS} writer processes, one moto-S3 table, {ROWS_PER_COMMIT}-row commits",
            value=together,
            unit="commits/s",
            baseline_name="one writer process alone",
            baseline_value=alone,
        ),
        Comparison(
            name=f"shards that rate serves at the shipped {interval:g} s commit interval (a commit a shard)",
            value=served,
            unit="shards",
            baseline_name="the target",
            baseline_value=SHARDS_TARGET,
            target=f">= {SHARDS_TARGET}",
            met=served >= SHARDS_TARGET,
        ),
    ]


WORKERS = 8
CHILDREN_PER_WORKER = 8
WORKER_SECONDS = float(os.environ.get("BENCH_LAKE_WORKERS_SECONDS", "60"))


def _worker_writer(job: tuple[str, str, str, float], out: Any) -> None:
    """One worker writer process, serving until `seconds` after the children's start plus their last
    answer; reports its commit rounds."""
    endpoint, root, address_file, stop_at = job
    try:
        stop = threading.Event()
        # As `entitlements.compose.lake_worker_writer` makes it: a round per commit interval.
        writer = WorkerWriter(
            _s3_lake(endpoint, root),
            Path(address_file),
            gather_seconds=LakeSettings().writer_gather_seconds,
            round_seconds=ConsumerSettings().commit_interval_seconds,
        )
        threading.Timer(max(0.0, stop_at - time.time()), stop.set).start()
        writer.serve(stop)
        out.put(("writer", address_file, writer.commit_rounds, None))
    except BaseException as error:
        out.put(("writer", address_file, 0, "".join(traceback.format_exception(error))))
        raise


def _children(job: tuple[str, int, float, float, float], out: Any) -> None:
    """A worker's children as threads: each flushes 500 rows of its own shard an `interval` after its
    last flush returned (the shard consumer's commit policy), from starts spread over one interval,
    for `seconds`; reports rows committed and each flush's answer time."""
    address_file, worker, start_at, seconds, interval = job

    answers: list[float] = []
    firsts: list[float] = []
    rows = [0]
    failures: list[str] = []
    lock = threading.Lock()

    def child(index: int) -> None:
        shard = f"shardId-{worker:04d}{index:04d}"
        client = WorkerWriterClient(Path(address_file), reply_timeout=120)
        waited = time.time() + 120
        while not Path(address_file).exists() and time.time() < waited:
            time.sleep(0.2)  # the writer is still importing (spawned processes on a busy machine)
        due = start_at + interval * index / CHILDREN_PER_WORKER
        number = 0
        while due < start_at + seconds:
            time.sleep(max(0.0, due - time.time()))
            data = _rows(shard, number * ROWS_PER_COMMIT, ROWS_PER_COMMIT).drop_columns(["event_date"])
            started = time.perf_counter()
            report = client.commit([("changes", [PendingFile("changes", _DAY, data)])])
            took = time.perf_counter() - started
            with lock:
                if report.failed is not None:
                    failures.append(f"{shard}: {report.error}")
                else:
                    # A shard's first commit reads its mark and looks its rows up in the table (a
                    # lease just taken): counted apart from the steady state.
                    (answers if number else firsts).append(took)
                    rows[0] += ROWS_PER_COMMIT
            number += 1
            # As the shard consumer does: the next commit is due an interval after this one returned.
            due = time.time() + interval

    threads = [threading.Thread(target=child, args=(i,)) for i in range(CHILDREN_PER_WORKER)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put(("children", worker, (rows[0], answers, firsts), "; ".join(failures) or None))


def _workers_serve() -> list[Comparison]:
    interval = ConsumerSettings().commit_interval_seconds
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    with moto_server() as endpoint, tempfile.TemporaryDirectory() as folder:
        lake = _on_s3(endpoint, f"workers-{os.getpid()}")
        root = lake.uri
        ensure_layout(lake, default_allow_list())
        before = open_table(lake, "changes")
        assert before is not None
        first_version = before.version()
        start_at = time.time() + 20.0  # every process imported and listening before the clock starts
        stop_at = start_at + WORKER_SECONDS + 30.0  # the children's last answers come before
        processes = []
        for worker in range(WORKERS):
            address = os.path.join(folder, f"writer-{worker}.json")
            processes.append(
                context.Process(target=_worker_writer, args=((endpoint, root, address, stop_at), out))
            )
            processes.append(
                context.Process(
                    target=_children, args=((address, worker, start_at, WORKER_SECONDS, interval), out)
                )
            )
        for process in processes:
            process.start()
        rows = 0
        answers: list[float] = []
        firsts: list[float] = []
        rounds = 0
        failed: list[str] = []
        for _ in range(len(processes)):
            kind, who, value, failure = out.get(timeout=stop_at - time.time() + 180)
            if failure:
                failed.append(f"{kind} {who}: {failure}")
            elif kind == "children":
                rows += value[0]
                answers += value[1]
                firsts += value[2]
            else:
                rounds += value
        for process in processes:
            process.join(60)
            if process.exitcode != 0:
                failed.append(f"process exited {process.exitcode}")
        table = open_table(lake, "changes")
        assert table is not None
        in_table = table.to_pyarrow_dataset().count_rows()
        commits = table.version() - first_version
    if failed or in_table != rows:
        for line in failed:
            print(f"bench worker writers failed: {line}", file=sys.stderr)
        print(f"bench: {rows:,} rows committed, {in_table:,} in the table", file=sys.stderr)
        raise SystemExit(1)
    seconds = WORKER_SECONDS
    answers.sort()
    p99 = answers[int(len(answers) * 0.99) - 1]
    shards = WORKERS * CHILDREN_PER_WORKER
    print(
        f"  {shards} children, {len(answers):,} flushes answered, {rows:,} rows committed and in the table; "
        f"{commits} commits ({rounds} rounds) in {seconds:.0f} s; answer p50 "
        f"{statistics.median(answers):.2f} s, p99 {p99:.2f} s; each shard's first flush (its mark read, "
        f"its rows looked up) p50 {statistics.median(firsts):.2f} s, max {max(firsts):.2f} s"
    )
    return [
        Comparison(
            name=f"{WORKERS} worker writers x {CHILDREN_PER_WORKER} children, one moto-S3 table: commits",
            value=commits / seconds,
            unit="commits/s",
            baseline_name=f"the model's {WORKERS} workers / {interval:g} s",
            baseline_value=WORKERS / interval,
            better="lower",
        ),
        Comparison(
            name=f"{shards} shards' flushes after each one's first, answered (p99) before the next is due",
            value=p99,
            unit="s",
            baseline_name="the shipped commit interval",
            baseline_value=interval,
            better="lower",
            target=f"<= {interval:g} s: {shards} shards served",
            met=p99 <= interval,
        ),
    ]


def _timed_append(lake: Lake, table: DeltaTable, data: pa.Table) -> float:
    started = time.perf_counter()
    append(lake, table, "changes", data, partition_by=TABLES["changes"].partition_by)
    return time.perf_counter() - started


def _flat_commits(lake: Lake, fresh_lake: Lake, where: str) -> list[Comparison]:
    """About 1,000 commits from 8 shards taking turns on `lake`, the maintenance runner looking after
    every round of turns (a simulated 5 s), its lease on a simulated clock, at the shipped cadence.
    The measured commits are the 10 just before the first compaction due after commit 1,000: the
    point of the cycle furthest from the last compaction (the bench checks that none ran among them
    and that one ran right after). The baseline is a fresh table in `fresh_lake`."""
    table = ensure_layout(lake, default_allow_list())["changes"]
    policy = MaintenancePolicy.from_settings(LakeSettings())
    clock = [1_000_000.0]
    runner = MaintenanceRunner(lake, policy, datasets=("changes",), clock=lambda: clock[0])
    runner.step()  # the tables take the shipped properties (checkpoints, statistics) first
    table = open_table(lake, "changes") or table
    # The baseline's commits 1..10 go to a fresh table, each right after one of the measured commits,
    # so both meet the same machine load (a shared 2-core machine's load moves several-fold in
    # minutes). The fresh table gets the shipped properties too.
    ensure_layout(fresh_lake, default_allow_list())
    MaintenanceRunner(fresh_lake, policy, datasets=("changes",), clock=lambda: clock[0]).step()
    fresh = open_table(fresh_lake, "changes")
    assert fresh is not None
    seconds: dict[int, float] = {}
    fresh_seconds: list[float] = []
    compactions: list[int] = []
    due: int | None = None  # the commit after which the first compaction past COMMITS is due
    number = 0
    while due is None or number < due:
        number += 1
        shard = f"shardId-{number % TURN_SHARDS:08d}"
        data = _rows(shard, number * ROWS_PER_COMMIT, ROWS_PER_COMMIT)
        seconds[number] = _timed_append(lake, table, data)
        if due is not None and number > due - 10:
            fresh_seconds.append(_timed_append(fresh_lake, fresh, data))
        if number % 200 == 0:
            recent = statistics.median(seconds[n] for n in range(number - 9, number + 1)) * 1000
            print(f"  {where}: {number} commits, the last 10 median {recent:.1f} ms", flush=True)
        if number % TURN_SHARDS == 0:
            clock[0] += 5.0
            if runner.step().compacted:
                compactions.append(number)
        if due is None and number >= COMMITS - 10 and compactions:
            # The runner compacts at its first look with compact_every_commits versions since the
            # last compaction (each commit here is one version).
            due = compactions[-1] + policy.compact_every_commits
            due += -due % TURN_SHARDS
            while due - 9 <= number:  # the whole window still ahead: the cycle after
                due += policy.compact_every_commits + -policy.compact_every_commits % TURN_SHARDS
    window = range(due - 9, due + 1)
    if any(c in window[:-1] for c in compactions) or compactions[-1] != due:
        print("bench: the measured commits were not the ones just before a compaction", file=sys.stderr)
        raise SystemExit(1)
    early = statistics.median(fresh_seconds) * 1000
    late = statistics.median(seconds[n] for n in window) * 1000
    own = statistics.median(seconds[n] for n in range(1, 11)) * 1000
    print(f"  the same table's own commits 1..10: median {own:.1f} ms")
    print(
        f"  compaction every {policy.compact_every_commits} commits, checkpoints every "
        f"{policy.checkpoint_interval}; compactions after commits {compactions[-3:]}; measured "
        f"{window.start}..{window.stop - 1}"
    )
    runner.step()
    files = len(active_files(open_table(lake, "changes")))
    per_shard = files / TURN_SHARDS
    return [
        Comparison(
            name=(
                f"{where}: commit time, commits {window.start}..{window.stop - 1} (median, just "
                "before a compaction), shipped maintenance cadence"
            ),
            value=late,
            unit="ms",
            baseline_name="commits 1..10 of a fresh table, interleaved with those",
            baseline_value=early,
            better="lower",
            target="within 1.5x",
            met=late <= 1.5 * early,
        ),
        Comparison(
            name=f"{where}: files per shard in the day's partition after {number:,} commits, maintained",
            value=per_shard,
            unit="files",
            baseline_name="the target",
            baseline_value=100,
            better="lower",
            target="<= 100",
            met=per_shard <= 100,
        ),
    ]


def _on_s3(endpoint: str, bucket: str) -> Lake:
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=_KEYS[0],
        aws_secret_access_key=_KEYS[1],
    )
    client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    return _s3_lake(endpoint, f"s3://{bucket}/lake")


def main() -> None:
    # The moto-S3 run of the commit-time part is opt-in (BENCH_LAKE_COMMITS_PARTS=s3): moto lists a
    # bucket's keys one by one, so it takes many minutes on a loaded machine.
    parts = set(os.environ.get("BENCH_LAKE_COMMITS_PARTS", "rate,workers,local").split(","))
    with tempfile.TemporaryDirectory() as root:
        if "rate" in parts:
            print_figures(
                f"lake commits (deltalake 1.6.6), load {os.getloadavg()[0]:.1f}: one log, many writers",
                _log_serves(),
            )
        if "workers" in parts:
            print_figures(
                f"lake commits, load {os.getloadavg()[0]:.1f}: a writer per worker, fed by its children",
                _workers_serve(),
            )
        if "local" in parts:
            print_figures(
                f"lake commits, load {os.getloadavg()[0]:.1f}: commit time under the shipped maintenance",
                _flat_commits(
                    open_lake(os.path.join(root, "flat")),
                    open_lake(os.path.join(root, "fresh")),
                    "local disk",
                ),
            )
        if "s3" in parts:
            with moto_server() as endpoint:
                print_figures(
                    f"lake commits, load {os.getloadavg()[0]:.1f}: the same on moto's S3",
                    _flat_commits(
                        _on_s3(endpoint, f"flat-{os.getpid()}"),
                        _on_s3(endpoint, f"fresh-{os.getpid()}"),
                        "moto S3",
                    ),
                )


if __name__ == "__main__":
    main()

"""`make bench` / `python -m bench kinesis`: the Kinesis source over several workers (issue 23, item 5),
through the real daemons (the launcher JVM, its Python children, the worker's lake writer process;
docs/operations/consumer.md "The lake writer beside each worker"), each worker a separate daemon of
one application, all on this machine. moto runs in a process of its own (`devstack.moto_process`).

Two parts, chosen by `BENCH_KINESIS_PARTS` (comma separated, default `drain,failover`); the bench ends
non-zero when a part fails or misses a target.

**drain**: a backlog of `BENCH_KINESIS_RECORDS` records (default 50,000) over a Kinesis stream of 8
shards, read by 1, 2 and then 3 workers (a fresh moto, stream and application each), with the shipped
poll settings (idle time, 1,000 records a call, the launcher's call spacing; `BENCH_KINESIS_WORKERS`
chooses the worker counts, default 1,2,3) and `worker_metrics = off`,
the setting docs/operations/sources.md ("Several workers") gives workers that share a host (with the
shipped `cpu` every worker on one host reports the same figure and a late worker may keep no lease).
The backlog is put straight into the Kinesis stream in the documented envelope (the forwarder's:
`devstack.kinesis_forwarder.kinesis_envelope`, partition key the item's key), not through DynamoDB
and the forwarder: the same records, set up in seconds instead of minutes. How a run goes:
1. the workers start on the empty stream while a trickle (a record every 50 ms) gives KCL's balancing
   the throughput it balances by, until the leases have spread (every shard held, none by more than
   ceil(8/N) + 1, each worker one or more) and the trickle is checkpointed on every shard;
2. every worker is killed (SIGKILL; the lake writers stay, as a kill leaves them), the backlog is put,
   and the same daemons are started again: each takes its own leases back at once (their rows still
   name it), so the backlog is drained by the spread workers and no read of it overlaps the puts;
3. the drain ends when the lease table holds each shard's checkpoint at its last backlog record.
Figures: records/s handed to the children from the moment the last of them is ready (its initialize
answered) to the last record handed (records counted by the share of the backlog's message bytes
handed in that span), beside the ceiling: moto's own service time of the Kinesis GetRecords calls
of the backlog, summed over the shards (`devstack.moto_server` serves the reads one at a time and
records each one's time under that lock: service only, no wait); target >= 0.9x. A restarted
daemon's children start together, about 2 CPU s each on the shared cores, and KCL's prefetch reads
each shard's first pages meanwhile: the start-up is printed beside the figure (the rate from the
first read, the start-up included, and when the last child was ready), as are the daemons' restart
and the put, so no part of the run is left out. CPU µs a record per kind of process (the JVMs, the
Python children, the lake writers, moto), read from /proc from each worker's first batch to the
drain's end (approximate: a child started after that batch is counted from when it was first seen);
and the processes' CPU against the machine's
cores: every process of the drain shares 2 cores, so more workers add no throughput once the cores are
busy (the share printed says whether they were).

**failover**: 3 workers over 8 shards of a table forwarded to Kinesis (`tests.support.kcl`, as
tests/pipeline/test_kcl_kinesis_scale.py runs them, with its settings: `worker_metrics = off` so that
workers on one host balance at all, which needs the traffic of a writer putting an item every 50 ms,
and the metrics report at a quarter of the failover time, so that a dead worker's row is stale when
its leases expire; that module's docstring says why). A non-leader is killed 3 times, then the leader
3 times, with a replacement started after each takeover and the leases spread again before the next
kill. Each takeover (the kill to the first read of the lease table naming a survivor for every shard
the victim held) is printed beside its bound: a non-leader's failover time + lease-assignment interval
+ 5 s, a leader's KCL 3.1.3 leader lock (2 minutes, not configurable before KCL 3.2.0:
pipeline/launcher/README.md, ../shared/notes/platform-facts.md) + assignment interval + 5 s. A new
leader must first take the lock and then watch the dead worker's leases for a failover time of its own
(its expiry clock starts when it becomes leader), so a leader's takeover can exceed that bound by up to
the failover time: the time to the new leader's first assignment is printed beside each.

The bench imports tests.support (the forwarded table, the consumer of the tests, the Python children
of a daemon; CONTRIBUTING.md: bench may import anything) but not the test module itself, which is
changed on its own: its settings are restated here.
"""

from __future__ import annotations

__all__ = ["main"]

import contextlib
import dataclasses
import json
import math
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from botocore.config import Config

from bench._daemon import bench_daemon, bench_settings, process_cpu_seconds
from bench._moto import REGION, moto_client, served_calls
from bench._report import Comparison, print_figures
from config import ConsumerSettings, Settings
from devstack.kinesis_forwarder import Precision, create_kinesis_stream, kinesis_envelope, partition_key
from devstack.moto_process import moto_process
from entitlements.compose import setup_retry_queues
from pipeline import KclDaemon, create_table, launcher_application_name
from schema import table_writes as writes
from tests.support.kcl import RunningConsumer, active_row, forwarded_table, lease_owners, running_consumer
from tests.support.polling import wait_for

T = TypeVar("T")

SHARDS = 8
DRAIN_WORKERS = (1, 2, 3)
DEFAULT_RECORDS = 50_000
PARTS = ("drain", "failover")
KINESIS_GET_RECORDS = "Kinesis_20131202.GetRecords"
PUT_BATCH = 500  # PutRecords' largest batch
TRICKLE_SECONDS = 0.05  # one record (the drain's warm-up) or one item (the failover's traffic) this often
_INITIALIZED = 'responseFor\\":\\"initialize'  # the JVM's line for a child's answer, as JSON-escaped
EMPTY_MESSAGE_BYTES = 200  # a ProcessRecords message with no record is ~130 bytes, one record ~1,500
EMPTY_PAGE_BYTES = 500  # an empty Kinesis GetRecords answer: ~200 bytes (the next iterator)
SPREAD_TIMEOUT = 300.0  # JVMs starting on a loaded 2-core machine, then KCL's balancing settling
DRAIN_TIMEOUT = 1500.0  # seconds for the largest backlog, on a loaded machine
POLL_SECONDS = 0.5  # each poll of a drain reads the lease table and every process's CPU
LEADER_LOCK_S = 120.0  # KCL 3.1.3's DynamoDB leader lock: fixed (configurable from KCL 3.2.0)
FAILOVER_WORKERS = 3
KILLS = 3  # of each kind, as the issue asks
# tests/pipeline/test_kcl_kinesis_scale.py's CONSUMER (its docstring says why each is set).
FAILOVER_MS = 6000
FAILOVER_CONSUMER = {
    "failover_time_ms": FAILOVER_MS,
    "lease_assignment_interval_ms": 1000,
    "worker_metrics_report_ms": FAILOVER_MS // 4,
    "worker_metrics": "off",
}
LEADER_LINE = "is a leader, performing assignment"  # KCL's LeaseAssignmentManager, each leader cycle

_SHARD = re.compile(r"for shard ([A-Za-z0-9_.-]+)")
_SIZE = re.compile(r"Message size == (\d+) bytes")


def _client(endpoint: str, service: str) -> Any:
    return moto_client(
        endpoint,
        service,
        Config(connect_timeout=5, read_timeout=120, retries={"mode": "standard", "max_attempts": 3}),
    )


def _parts() -> tuple[str, ...]:
    chosen = tuple(
        part.strip()
        for part in os.environ.get("BENCH_KINESIS_PARTS", ",".join(PARTS)).split(",")
        if part.strip()
    )
    unknown = sorted(set(chosen) - set(PARTS))
    if unknown or not chosen:
        raise SystemExit(
            f"bench_kinesis: BENCH_KINESIS_PARTS takes {', '.join(PARTS)}; not {unknown or 'none'}"
        )
    return chosen


def _records() -> int:
    raw = os.environ.get("BENCH_KINESIS_RECORDS", str(DEFAULT_RECORDS))
    if not raw.isdigit() or int(raw) < SHARDS:
        raise SystemExit(f"bench_kinesis: BENCH_KINESIS_RECORDS must be a whole number >= {SHARDS}")
    return int(raw)


def _drain_workers() -> tuple[int, ...]:
    raw = os.environ.get("BENCH_KINESIS_WORKERS", ",".join(map(str, DRAIN_WORKERS)))
    chosen = [part.strip() for part in raw.split(",") if part.strip()]
    if not chosen or not all(part.isdigit() and 1 <= int(part) <= SHARDS for part in chosen):
        raise SystemExit(
            f"bench_kinesis: BENCH_KINESIS_WORKERS takes counts from 1 to {SHARDS}, comma separated"
        )
    return tuple(map(int, chosen))


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _wait(probe: Callable[[], T | None], what: str, timeout: float, interval: float = POLL_SECONDS) -> T:
    """`tests.support.polling.wait_for`, ending the bench with one line instead of a test's failure."""
    try:
        return wait_for(probe, timeout=timeout, interval=interval)
    except AssertionError:
        raise SystemExit(f"bench_kinesis: timed out after {timeout:.0f} s waiting for {what}") from None


def _epoch(line: str) -> float | None:
    """A launcher log line's time (its JSON `ts`) as epoch seconds."""
    try:
        return datetime.fromisoformat(json.loads(line)["ts"]).timestamp()
    except (ValueError, KeyError, TypeError):
        return None


def _deliveries(log: Path, since: float) -> list[tuple[float, int]]:
    """The times and sizes (bytes) of the non-empty ProcessRecords messages the daemon handed its
    children since `since`. The JVM logs each message's write and then its size, per shard, from
    threads of its own, so with several shards the two lines are paired by the shard they name."""
    if not log.exists():
        return []
    found: list[tuple[float, int]] = []
    pending: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        if "Message" not in line or (shard := _SHARD.search(line)) is None:
            continue
        if "Writing ProcessRecordsMessage" in line:
            if (at := _epoch(line)) is not None:
                pending[shard.group(1)] = at
        elif (size := _SIZE.search(line)) is not None:
            at = pending.pop(shard.group(1), None)
            if at is not None and at >= since and int(size.group(1)) > EMPTY_MESSAGE_BYTES:
                found.append((at, int(size.group(1))))
        elif "Writing " in line:
            pending.pop(shard.group(1), None)
    return found


def _children_ready(log: Path, since: float) -> list[float]:
    """When each child started since `since` answered its initialize message: from then on it takes
    records (KCL's prefetch reads a shard's first pages while its child is still starting)."""
    if not log.exists():
        return []
    return [
        at
        for line in log.read_text(errors="replace").splitlines()
        if _INITIALIZED in line and (at := _epoch(line)) is not None and at >= since
    ]


def _leader_since(logs: list[Path], since: float) -> float | None:
    """The first time after `since` that one of these daemons logged a leader's assignment cycle."""
    times = [
        at
        for log in logs
        if log.exists()
        for line in log.read_text(errors="replace").splitlines()
        if LEADER_LINE in line and (at := _epoch(line)) is not None and at >= since
    ]
    return min(times, default=None)


def _most_leases(workers: int) -> int:
    """The issue's bound on one worker's leases: ceil(shards / workers) + 1."""
    return math.ceil(SHARDS / workers) + 1


def _spread(owners: dict[str, str | None], live: set[str]) -> dict[str, int] | None:
    """Leases held per live worker, when every shard's lease is held by a live worker, each holds one
    or more and none more than the bound; else None."""
    counts = dict.fromkeys(live, 0)
    for owner in owners.values():
        if owner in counts:
            counts[owner] += 1
    every_shard = len(owners) == SHARDS and all(owner in counts for owner in owners.values())
    fair = bool(counts) and min(counts.values()) >= 1 and max(counts.values()) <= _most_leases(len(live))
    return counts if every_shard and fair else None


# --- drain ---------------------------------------------------------------------------------------


def _envelopes(table: str, count: int, tag: str) -> Iterator[dict[str, Any]]:
    """`count` Kinesis entries (Data, PartitionKey) of fresh signups of `table`, in the documented
    envelope, one item each."""
    for index in range(count):
        now = datetime.now(UTC)
        row = writes.entitlement_row(
            f"user-{tag}-{index:06d}", f"acct-{tag}-{index:06d}", now=now, processor_token="t"
        )
        keys = {"pk": row["pk"], "sk": row["sk"]}
        change = {
            "eventID": uuid.uuid4().hex,
            "eventName": "INSERT",
            "awsRegion": REGION,
            "userIdentity": None,
            "dynamodb": {
                "ApproximateCreationDateTime": now,
                "Keys": keys,
                "NewImage": row,
                "SizeBytes": len(json.dumps(row)),
            },
        }
        envelope = kinesis_envelope(change, table_name=table, precision=Precision.MICROSECOND)
        yield {"Data": json.dumps(envelope, default=str).encode(), "PartitionKey": partition_key(keys)}


def _put(kinesis: Any, stream: str, entries: list[dict[str, Any]], last: dict[str, int]) -> None:
    """Put `entries`, again those throttled; each shard's last sequence number into `last`."""
    for start in range(0, len(entries), PUT_BATCH):
        pending = entries[start : start + PUT_BATCH]
        while pending:
            answer = kinesis.put_records(StreamName=stream, Records=pending)
            retry = []
            for entry, result in zip(pending, answer["Records"], strict=True):
                if "ErrorCode" in result:
                    retry.append(entry)
                else:
                    shard, number = result["ShardId"], int(result["SequenceNumber"])
                    last[shard] = max(last.get(shard, 0), number)
            pending = retry


class _Trickle:
    """Puts one record every `TRICKLE_SECONDS` on a thread until stopped (the drain's warm-up)."""

    def __init__(self, kinesis: Any, stream: str, table: str) -> None:
        self.last: dict[str, int] = {}
        self._stop = threading.Event()
        self._failure: BaseException | None = None

        def run() -> None:
            entries = _envelopes(table, 10**9, f"w{uuid.uuid4().hex[:6]}")
            try:
                while not self._stop.wait(TRICKLE_SECONDS):
                    _put(kinesis, stream, [next(entries)], self.last)
            except BaseException as failure:  # the bench must hear of it (stop() raises)
                self._failure = failure

        self._thread = threading.Thread(target=run, name="kinesis-trickle", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        if self._failure is not None:
            raise SystemExit(f"bench_kinesis: the warm-up trickle failed ({type(self._failure).__name__})")


def _checkpointed(dynamodb: Any, lease_table: str, last: dict[str, int]) -> bool:
    """Whether the lease table holds each shard's checkpoint at or past its `last` sequence number (read
    from the table itself with the bench's one client: tests.support.leases builds a client a call,
    ~0.1 CPU s, too much for a poll beside a CPU-bound drain)."""
    items = dynamodb.scan(TableName=lease_table, ConsistentRead=True)["Items"]
    held = {str(item["leaseKey"]["S"]): str(item.get("checkpoint", {}).get("S", "")) for item in items}
    return all(held.get(shard, "").isdigit() and int(held[shard]) >= number for shard, number in last.items())


@dataclasses.dataclass
class _Cpu:
    """The CPU seconds of a drain's processes, by kind, from each process's first sample on."""

    first: dict[int, float] = dataclasses.field(default_factory=dict)
    latest: dict[int, float] = dataclasses.field(default_factory=dict)
    kinds: dict[int, str] = dataclasses.field(default_factory=dict)

    def sample(self, pid: int, kind: str) -> None:
        seconds = process_cpu_seconds(pid)
        if seconds <= 0:  # gone: its last sample stands
            return
        self.first.setdefault(pid, seconds)
        self.kinds.setdefault(pid, kind)
        self.latest[pid] = seconds

    def by_kind(self) -> dict[str, float]:
        used: dict[str, float] = {}
        for pid, kind in self.kinds.items():
            used[kind] = used.get(kind, 0.0) + self.latest[pid] - self.first[pid]
        return used


@dataclasses.dataclass(frozen=True)
class _DrainRun:
    workers: int
    records: int
    seconds: float  # first GetRecords with backlog records to the last record handed to a child
    ready: float  # that first GetRecords to the last child of the run ready (its initialize answered)
    handed_after_ready: float  # records handed from then on (the backlog's share of message bytes)
    moto_seconds: float  # moto's service time of the Kinesis GetRecords calls over the same span
    calls: int
    restart: float  # the daemons' restart to the first GetRecords with backlog records
    put_seconds: float
    landed_after: float  # the first GetRecords with records to every shard checkpointed at its end
    cpu_seconds: dict[str, float]
    leases_before: dict[str, int]
    leases_after: dict[str, int]
    first_reads: list[float]  # each worker's first batch, seconds after the first one
    load: str

    @property
    def rate(self) -> float:
        """Records handed a second once every child is ready: what the drain sustains."""
        return self.handed_after_ready / (self.seconds - self.ready)

    @property
    def rate_with_start_up(self) -> float:
        """The whole backlog over the whole drain, the children's start-up included."""
        return self.records / self.seconds

    @property
    def ceiling(self) -> float:
        return self.records / self.moto_seconds


def _counts(owners: dict[str, str | None], workers: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(workers, 0)
    for owner in owners.values():
        if owner in counts:
            counts[owner] += 1
    return counts


@dataclasses.dataclass
class _DrainFleet:
    """A drain's workers: each a daemon (and its log) of one application."""

    daemons: dict[str, tuple[KclDaemon, Path]]
    dynamodb: Any
    lease_table: str

    def spread(self) -> dict[str, int] | None:
        return _spread(lease_owners(self.dynamodb, self.lease_table), set(self.daemons))

    def start(self) -> None:
        for daemon, _ in self.daemons.values():
            daemon.start()

    def kill(self) -> None:
        for daemon, _ in self.daemons.values():
            daemon.kill()

    def sample(self, cpu: _Cpu, sampled: set[str], since: float) -> None:
        """Each process's CPU, of the workers that have handed a batch over since `since` (`sampled`)."""
        for worker, (daemon, log) in self.daemons.items():
            if worker not in sampled and _deliveries(log, since):
                sampled.add(worker)
            if worker not in sampled:
                continue
            if daemon.pid is not None and daemon.running:
                cpu.sample(daemon.pid, "JVMs")
                for child in _children(daemon.pid):
                    cpu.sample(child, "Python children")
            if daemon.writer_pid is not None:
                cpu.sample(daemon.writer_pid, "lake writers")


def _warm_up(fleet: _DrainFleet, kinesis: Any, stream: str, table: str) -> dict[str, int]:
    """Start the workers while a trickle flows, until the leases have spread and every trickle record is
    checkpointed; the leases each worker holds then."""
    trickle = _Trickle(kinesis, stream, table)
    try:
        fleet.start()
        spread = _wait(
            fleet.spread, f"the leases to spread over {len(fleet.daemons)} worker(s)", SPREAD_TIMEOUT
        )
    finally:
        trickle.stop()
    _wait(
        lambda: _checkpointed(fleet.dynamodb, fleet.lease_table, trickle.last),
        "the warm-up's checkpoints",
        120,
    )
    # KCL may still move a lease once the trickle stops: the backlog needs them spread at the kill.
    return _wait(fleet.spread, f"the leases spread after the warm-up (first spread: {spread})", 60)


def _drain(workers: int, records: int, workdir: Path) -> _DrainRun:
    with moto_process() as moto, contextlib.ExitStack() as running:
        kinesis, dynamodb = _client(moto.endpoint, "kinesis"), _client(moto.endpoint, "dynamodb")
        table = create_table(dynamodb, f"bench-kdrain-{uuid.uuid4().hex[:6]}")
        stream = f"{table.table_name}-changes"
        settings = bench_settings(
            moto.endpoint,
            table.table_name,
            workdir / f"drain-{workers}",
            application=f"bench-{uuid.uuid4().hex[:8]}",
            consumer={"worker_metrics": "off"},
            source={"kind": "kinesis", "stream_arn": create_kinesis_stream(kinesis, stream, SHARDS)},
        )
        setup_retry_queues(settings)
        fleet = _DrainFleet({}, dynamodb, launcher_application_name(settings))
        for number in range(1, workers + 1):
            worker = f"drain-{number}"
            fleet.daemons[worker] = bench_daemon(settings, stream_arn=table.stream_arn, worker_id=worker)
            running.callback(_stop, fleet.daemons[worker][0])
        # 1. the leases spread and the warm-up checkpointed
        leases_before = _warm_up(fleet, kinesis, stream, table.table_name)
        # 2. every worker killed, the backlog put, the same daemons started again
        fleet.kill()
        last: dict[str, int] = {}
        entries = list(_envelopes(table.table_name, records, uuid.uuid4().hex[:6]))
        put_started = time.monotonic()
        _put(kinesis, stream, entries, last)
        put_seconds = time.monotonic() - put_started
        print(
            f"  (drain, {workers} worker(s): leases spread {leases_before}; {records:,} records put in "
            f"{put_seconds:.1f} s; the workers started again; load average {_load()})"
        )
        sys.stdout.flush()
        restarted = time.time()
        fleet.start()
        # 3. CPU from each worker's first batch of the backlog; the end: every shard checkpointed
        cpu, sampled = _Cpu(), set[str]()

        def drained() -> bool:
            fleet.sample(cpu, sampled, restarted)
            if sampled:
                cpu.sample(moto.pid, "moto")
            return _checkpointed(dynamodb, fleet.lease_table, last)

        _wait(drained, f"the {records:,}-record backlog checkpointed on every shard", DRAIN_TIMEOUT)
        done = time.time()
        drained()  # a last CPU sample of every process
        leases_after = _counts(lease_owners(dynamodb, fleet.lease_table), list(fleet.daemons))
        calls = [call for call in served_calls(moto.endpoint, KINESIS_GET_RECORDS) if call.began >= restarted]
        handed = [_deliveries(log, restarted) for _, log in fleet.daemons.values()]
        ready = [at for _, log in fleet.daemons.values() for at in _children_ready(log, restarted)]
    firsts = [min(at for at, _ in messages) for messages in handed if messages]
    full = [index for index, call in enumerate(calls) if call.bytes > EMPTY_PAGE_BYTES]
    if not full or len(firsts) != workers:
        raise SystemExit(f"bench_kinesis: {len(firsts)} of {workers} workers handed backlog records over")
    reading = calls[full[0] : full[-1] + 1]
    began = reading[0].began
    sizes = [(at, size) for messages in handed for at, size in messages]
    last_handed = max(at for at, _ in sizes)
    all_ready = max(ready, default=began)
    share = sum(size for at, size in sizes if at >= all_ready) / sum(size for _, size in sizes)
    if last_handed <= all_ready:
        raise SystemExit(
            "bench_kinesis: every backlog record was handed over before the last child was ready"
        )
    return _DrainRun(
        workers=workers,
        records=records,
        seconds=last_handed - began,
        ready=max(all_ready - began, 0.0),
        handed_after_ready=records * share,
        moto_seconds=sum(call.seconds for call in reading),
        calls=len(reading),
        restart=began - restarted,
        put_seconds=put_seconds,
        landed_after=done - began,
        cpu_seconds=cpu.by_kind(),
        leases_before=leases_before,
        leases_after=leases_after,
        first_reads=sorted(first - min(firsts) for first in firsts),
        load=_load(),
    )


def _children(jvm: int) -> list[int]:
    """The pids of the JVM's Python children (`entitlements.child`, started by the JVM itself), read from
    /proc: a process that ends meanwhile is skipped (tests.support.kcl.python_children's psutil walk
    raises on one)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if parent == jvm and b"entitlements.child" in (stat.parent / "cmdline").read_bytes():
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):  # it ended meanwhile
            continue
    return found


def _stop(daemon: KclDaemon) -> None:
    """Kill the JVM (nothing needs a checkpoint once a figure is read), then stop its lake writer."""
    daemon.kill()
    daemon.stop(timeout=30)


def _report_drain(run: _DrainRun) -> bool:
    met = run.rate >= 0.9 * run.ceiling
    print_figures(
        f"Kinesis drain through {run.workers} real daemon(s), 8 shards, shipped poll settings "
        f"(worker_metrics off)",
        [
            Comparison(
                name=f"drain: a {run.records:,}-record backlog handed to the children once all were "
                f"ready, {run.workers} worker(s)",
                value=run.rate,
                unit="records/s",
                baseline_name=f"ceiling: moto's service time of the {run.calls} same Kinesis GetRecords "
                "calls, summed over the shards",
                baseline_value=run.ceiling,
                target="ratio >= 0.9",
                met=met,
            )
        ],
    )
    cores = os.cpu_count() or 1
    total = sum(run.cpu_seconds.values())
    print(
        f"  (the drain's rate from its first read, the children's start-up included: "
        f"{run.rate_with_start_up:,.0f} records/s, {run.rate_with_start_up / run.ceiling:.2f}x; the last "
        f"child ready {run.ready:.1f} s after that first read (KCL reads ahead meanwhile), "
        f"{run.handed_after_ready:,.0f} records ({run.handed_after_ready / run.records:.0%}, by message "
        f"bytes) handed over in the {run.seconds - run.ready:.1f} s after it)"
    )
    print(
        f"  (drain {run.seconds:.1f} s from the first GetRecords with records to the last record handed "
        f"over, moto serving GetRecords {run.moto_seconds:.1f} s of it; every shard checkpointed at its "
        f"end {run.landed_after:.1f} s after that first call; counted apart: the backlog put "
        f"{run.put_seconds:.1f} s, the daemons' restart to the first read {run.restart:.1f} s; the "
        f"workers' first batches at +" + ", +".join(f"{first:.1f}" for first in run.first_reads) + " s)"
    )
    print(
        f"  (leases per worker before the drain {run.leases_before}, after it {run.leases_after}; "
        f"load average {run.load})"
    )
    print(
        "  (CPU per drained record, approximate, from each worker's first batch: "
        + ", ".join(
            f"{kind} {seconds / run.records * 1e6:,.0f} µs" for kind, seconds in run.cpu_seconds.items()
        )
        + f"; together {total / run.records * 1e6:,.0f} µs, {total:.1f} CPU s over the "
        f"{run.landed_after:.1f} s to the last checkpoint: {total / run.landed_after / cores:.0%} of the "
        f"machine's {cores} cores, shared by every process of the drain: they bound it once busy)"
    )
    return met


def _report_scale(runs: list[_DrainRun]) -> None:
    one = next((run for run in runs if run.workers == 1), None)
    if one is None or len(runs) < 2:
        return
    cores = os.cpu_count() or 1
    print_figures(
        f"Kinesis drain: more workers on one machine of {cores} cores (no target: the cores bound it)",
        [
            Comparison(
                name=f"drain with {run.workers} workers",
                value=run.rate,
                unit="records/s",
                baseline_name="the same backlog with 1 worker, this run",
                baseline_value=one.rate,
            )
            for run in runs
            if run.workers != 1
        ],
    )


def _drain_part(workdir: Path) -> bool:
    records = _records()
    runs: list[_DrainRun] = []
    met = True
    for workers in _drain_workers():
        try:
            run = _drain(workers, records, workdir)
        except SystemExit as failure:
            print(f"\n== Kinesis drain, {workers} worker(s): not measured ({failure})")
            met = False
            continue
        runs.append(run)
        met = _report_drain(run) and met
        sys.stdout.flush()
    _report_scale(runs)
    return met


# --- failover ------------------------------------------------------------------------------------


class _Writer:
    """Puts a fresh Active row every `TRICKLE_SECONDS` on a thread until stopped: the traffic KCL's
    balancing needs with `worker_metrics = off`."""

    def __init__(self, dynamodb: Any, table: str) -> None:
        self.written = 0
        self._stop = threading.Event()

        def run() -> None:
            while not self._stop.wait(TRICKLE_SECONDS):
                with contextlib.suppress(Exception):  # a slow moment of moto: the next put goes on
                    dynamodb.put_item(TableName=table, Item=active_row(f"u-{uuid.uuid4().hex[:12]}"))
                    self.written += 1

        self._thread = threading.Thread(target=run, name="kinesis-writer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@dataclasses.dataclass(frozen=True)
class _Takeover:
    kind: str  # "non-leader" or "leader"
    seconds: float  # the kill to every lease of the victim held by a survivor
    leases: int  # the victim's
    new_leader: float | None  # the kill to a survivor's first leader cycle (a leader's kill)
    spread: float  # seconds the leases took to spread before this kill
    load: str


@dataclasses.dataclass
class _Fleet:
    consumer: RunningConsumer
    dynamodb: Any
    started: int = 0

    @property
    def settings(self) -> Settings:
        return self.consumer.settings

    def start(self) -> str:
        return self.consumer.start_next_worker()

    def live(self) -> set[str]:
        return self.consumer.live_workers()

    def owners(self) -> dict[str, str | None]:
        return lease_owners(self.dynamodb, launcher_application_name(self.settings))

    def log(self, worker: str) -> Path:
        return self.settings.consumer.state_dir / "daemon" / f"daemon-{worker}.log"

    def leader(self) -> str:
        """The live worker that runs the lease assignment (the only one whose log says it does)."""
        leaders = [
            worker for worker in self.live() if LEADER_LINE in self.log(worker).read_text(errors="replace")
        ]
        if len(leaders) != 1:
            raise SystemExit(f"bench_kinesis: {len(leaders)} live workers logged the leader's assignment")
        return leaders[0]

    def kill_all(self) -> None:
        for daemon in self.consumer.daemons.values():
            daemon.kill()  # running_consumer's stop then only stops the lake writers


def _take_over(fleet: _Fleet, kind: str) -> _Takeover:
    started = time.monotonic()
    _wait(lambda: _spread(fleet.owners(), fleet.live()), "the leases to spread", SPREAD_TIMEOUT)
    spread = time.monotonic() - started
    leader = fleet.leader()
    owners = fleet.owners()
    if kind == "leader":
        victim = leader
    else:
        held = _counts(owners, [worker for worker in fleet.live() if worker != leader])
        victim = max(held, key=lambda worker: held[worker])
    shards = {shard for shard, owner in owners.items() if owner == victim}
    survivors = fleet.live() - {victim}
    killed_at, killed = time.time(), time.monotonic()
    fleet.consumer.daemons[victim].kill()

    def moved() -> float | None:
        now = fleet.owners()
        return time.monotonic() - killed if all(now.get(shard) in survivors for shard in shards) else None

    seconds = _wait(moved, f"the {kind}'s leases to be taken over", LEADER_LOCK_S * 2, interval=0.2)
    new_leader = None
    if kind == "leader":
        at = _leader_since([fleet.log(worker) for worker in survivors], killed_at)
        new_leader = None if at is None else at - killed_at
    # The dead worker's lake writer (a kill leaves it, for a restart) is not needed any more: stopped,
    # so that the fleet's processes stay those of 3 workers.
    fleet.consumer.daemons[victim].stop(timeout=30)
    fleet.start()  # the replacement: the fleet back to its size for the next kill
    return _Takeover(kind, seconds, len(shards), new_leader, spread, _load())


def _failover_part(workdir: Path) -> bool:
    takeovers: list[_Takeover] = []
    failure: str | None = None
    settings: ConsumerSettings | None = None
    with moto_process() as moto:
        endpoint = moto.endpoint
        forwarded = forwarded_table(endpoint, SHARDS)
        writer = _Writer(_client(endpoint, "dynamodb"), forwarded.name)
        forwarded.forwarder.start()
        try:
            with running_consumer(
                endpoint,
                workdir / "failover",
                worker_id="",
                table=(forwarded.name, forwarded.stream_arn),
                source={"kind": "kinesis", "stream_arn": forwarded.kinesis_arn},
                consumer=FAILOVER_CONSUMER,
            ) as consumer:
                fleet = _Fleet(consumer, _client(endpoint, "dynamodb"))
                settings = consumer.settings.consumer
                try:
                    for _ in range(FAILOVER_WORKERS):
                        fleet.start()
                    for kind in ("non-leader",) * KILLS + ("leader",) * KILLS:
                        takeovers.append(_take_over(fleet, kind))
                        print(
                            f"  ({kind} kill {len(takeovers)}: {takeovers[-1].seconds:.1f} s, "
                            f"load average {takeovers[-1].load})"
                        )
                        sys.stdout.flush()
                except SystemExit as ended:
                    failure = str(ended)
                finally:
                    fleet.kill_all()
        finally:
            writer.stop()
            forwarded.forwarder.stop()
    met = settings is not None and _report_failover(takeovers, settings, writer.written)
    if failure is not None:
        print(f"\n== Kinesis failover: {KILLS * 2 - len(takeovers)} kill(s) not measured ({failure})")
        return False
    return met


def _report_failover(takeovers: list[_Takeover], consumer: ConsumerSettings, written: int) -> bool:
    failover, assignment = consumer.failover_time_ms / 1000, consumer.lease_assignment_interval_ms / 1000
    bounds = {"non-leader": failover + assignment + 5, "leader": LEADER_LOCK_S + assignment + 5}
    figures = []
    for number, takeover in enumerate(takeovers, 1):
        bound = bounds[takeover.kind]
        pieces = (
            f"failover {failover:g} s + assignment {assignment:g} s + 5 s"
            if takeover.kind == "non-leader"
            else f"leader lock {LEADER_LOCK_S:g} s + assignment {assignment:g} s + 5 s"
        )
        figures.append(
            Comparison(
                name=f"kill {number}: the {takeover.kind} ({takeover.leases} leases) killed, to a survivor "
                "holding each",
                value=takeover.seconds,
                unit="s",
                baseline_name=f"bound: {pieces}",
                baseline_value=bound,
                better="lower",
                target=f"<= {bound:g} s",
                met=takeover.seconds <= bound,
            )
        )
    if not figures:
        return False
    print_figures(
        f"Kinesis failover: {FAILOVER_WORKERS} workers over {SHARDS} shards with traffic (the kcl scale "
        f"test's settings: failover {failover:g} s, assignment {assignment:g} s, worker_metrics off)",
        figures,
    )
    for number, takeover in enumerate(takeovers, 1):
        leader = (
            f", a survivor's first leader cycle {takeover.new_leader:.1f} s after the kill"
            if takeover.new_leader is not None
            else ""
        )
        print(
            f"  (kill {number}: leases spread {takeover.spread:.1f} s before it{leader}; load average "
            f"{takeover.load})"
        )
    print(f"  ({written:,} items written through the part; a replacement worker started after each takeover)")
    return all(figure.met for figure in figures)


def main() -> None:
    parts = _parts()
    defaults = ConsumerSettings()
    print(
        f"\nKinesis bench, parts {', '.join(parts)}; shipped defaults: idle "
        f"{defaults.idle_time_between_reads_ms} ms, failover {defaults.failover_time_ms} ms, lease "
        f"assignment {defaults.lease_assignment_interval_ms} ms, worker metrics {defaults.worker_metrics}; "
        f"{os.cpu_count()} cores; load average {_load()}"
    )
    failed = []
    with tempfile.TemporaryDirectory(prefix="bench-kinesis-") as tmp:
        workdir = Path(tmp)
        if "drain" in parts and not _drain_part(workdir):
            failed.append("drain")
        sys.stdout.flush()
        if "failover" in parts and not _failover_part(workdir):
            failed.append("failover")
    if failed:
        raise SystemExit(f"bench_kinesis: failed or missed a target: {', '.join(failed)}")


if __name__ == "__main__":
    main()

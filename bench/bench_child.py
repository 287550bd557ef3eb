"""`make bench` / `python -m bench child`: the KCL child's CPU per record end to end, through the real daemon.

The figure: the CPU time (user + system, read from the child process) that `python -m entitlements.child`
spends per record delivered: the multilang protocol, the decoder, the handlers the child registers (the
cleanup handler and the lake), and the commits (every handler flushed, the lake's Parquet written, the
checkpoint). Baseline, in the same run, through the same launcher jar on the same stream: a do-nothing
kclpy child (`bench/_null_child.py`) that only checkpoints, at the same cadence, so its cost is the
protocol alone. The commit cadence and the lake's flush bounds are the production defaults.

How one run goes. moto (the project's `devstack.moto_server`, in this process) holds one table. A warm-up
of `WARM_UP` records is written first; both daemons (two application names, so two lease tables) read the
stream from TRIM_HORIZON, and each child is started, imports, takes the warm-up and checkpoints it. Then
both JVMs are paused (SIGSTOP), each child's CPU is read (it waits on its stdin), the backlog of
`BACKLOG` records is written, and the JVMs resume: each consumer reads the backlog as a backlog (full
GetRecords pages), and each child's CPU is read again once its checkpoint reaches the backlog's last record.
So a child's start-up (imports, clients, the first lake files) is kept out of the per-record figure and
reported apart. The lake of the real child is checked afterwards: every record of the stream in it once.

One run of each, concurrently: the machine is shared, so the two children meet the same conditions.
"""

from __future__ import annotations

__all__ = ["main"]

import dataclasses
import os
import signal
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.config import Config

from analytics import connect, lake_from_settings
from bench._daemon import (
    bench_daemon,
    bench_settings,
    child_pid,
    process_cpu_seconds,
    stream_sequence_numbers,
)
from bench._moto import moto_client
from bench._report import Comparison, print_figures
from config import Settings
from devstack.fake_array import FakeArrayServer
from devstack.moto_server import MotoServer
from pipeline import KclDaemon, create_table
from processors.cleanup import ensure_retry_queues
from schema import table_writes as writes
from schema.table import EntitlementStatus

WARM_UP = 100  # records: each child's first decode, lake files and checkpoint, outside the figure
BACKLOG = 3000  # records: two thirds signups (INSERT), one third cancellations (MODIFY + INSERT)
START_TIMEOUT = 180.0  # seconds for a daemon's cold start to its child's first checkpoint
STOP_TIMEOUT = 30.0  # seconds for a graceful stop, then the daemon is killed
REAL_CHILD = "entitlements.child"
NULL_CHILD = "bench._null_child"


def _client(endpoint: str, service: str) -> Any:
    # Bounded calls: a call stuck behind a paused JVM's half-sent request fails the run, never hangs it.
    return moto_client(
        endpoint,
        service,
        Config(connect_timeout=5, read_timeout=30, retries={"mode": "standard", "max_attempts": 2}),
    )


def _settings(endpoint: str, table: str, state_dir: Path, application: str, array_url: str) -> Settings:
    """Production defaults for the child (commit cadence, lake flush bounds); the daemon's lease timings
    tuned for a quick start on one machine, with a lease that outlives the pause."""
    return bench_settings(
        endpoint,
        table,
        state_dir,
        application=application,
        consumer={
            "idle_time_between_reads_ms": 200,
            "failover_time_ms": 60_000,
            "lease_assignment_interval_ms": 1000,
            "shard_sync_interval_ms": 2000,
        },
        array={"base_url": array_url},
    )


def _write(client: Any, table: str, signups: int) -> None:
    """`signups` signups (one put each); every second one then cancelled (a transaction: the row set
    Cancelled and a cancellation record written with a TTL far ahead): 2 stream records per cancellation."""
    now = datetime.now(UTC)
    tag = uuid.uuid4().hex[:6]
    pairs = [(f"user-{tag}-{i:05d}", f"acct-{tag}-{i:05d}") for i in range(signups)]
    for start in range(0, signups, 25):
        client.batch_write_item(
            RequestItems={
                table: [
                    {
                        "PutRequest": {
                            "Item": writes.entitlement_row(
                                user, account, status=EntitlementStatus.ACTIVE, processor_token="t", now=now
                            )
                        }
                    }
                    for user, account in pairs[start : start + 25]
                ]
            }
        )
    ttl = {"N": str(writes.ttl_after(now, 63))}
    for user, account in pairs[::2]:
        client.transact_write_items(
            TransactItems=writes.cancellation_transaction(table, user, account, ttl=ttl, now=now)
        )


def _write_records(client: Any, table: str, records: int) -> None:
    """About `records` stream records: 3 per pair of signups (2 INSERTs, 1 cancellation = 2 records)."""
    _write(client, table, signups=max(2, records // 2))


def _checkpoint(dynamodb: Any, application: str) -> int | None:
    """The consumer's checkpoint (the lease table's, one shard), or None before its first."""
    try:
        items = dynamodb.scan(TableName=application, ConsistentRead=True)["Items"]
    except dynamodb.exceptions.ResourceNotFoundException:
        return None
    for item in items:
        value = item.get("checkpoint", {}).get("S", "")
        if value.isdigit():
            return int(value)
    return None


def _cpu_ticks_seconds(pid: int) -> float:
    """utime + stime from /proc/<pid>/stat (ended threads included), in seconds: the cross-check."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise SystemExit(f"bench_child: timed out waiting for {what}")


@dataclasses.dataclass
class _Consumer:
    label: str
    module: str
    settings: Settings
    daemon: KclDaemon
    child: int | None = None
    # (precise, ticks) CPU seconds of the child: when paused after the warm-up (its start-up), and once
    # it has checkpointed the backlog.
    started_cpu: tuple[float, float] = (0.0, 0.0)
    done_cpu: tuple[float, float] | None = None
    done_at: float | None = None

    @property
    def application(self) -> str:
        return self.settings.consumer.application_name

    def read_cpu(self) -> tuple[float, float]:
        assert self.child is not None
        return process_cpu_seconds(self.child), _cpu_ticks_seconds(self.child)

    def checkpointed(self, dynamodb: Any, sequence_number: int) -> Callable[[], bool]:
        return lambda: (_checkpoint(dynamodb, self.application) or 0) >= sequence_number


def _run(workdir: Path) -> tuple[_Consumer, _Consumer, int, float]:
    """Both consumers through one run; returns them, the backlog's length, and the seconds from the
    daemons' start to the warm-up checkpoints (the cold start)."""
    with MotoServer() as moto, FakeArrayServer(host="127.0.0.1", port=0) as array:
        endpoint = moto.endpoint
        dynamodb, streams = _client(endpoint, "dynamodb"), _client(endpoint, "dynamodbstreams")
        table = create_table(dynamodb, f"entitlements-bench-{uuid.uuid4().hex[:6]}")
        consumers = []
        for label, module in (("real", REAL_CHILD), ("null", NULL_CHILD)):
            settings = _settings(
                endpoint,
                table.table_name,
                workdir / label,
                f"bench-{label}-{uuid.uuid4().hex[:6]}",
                array.url,
            )
            daemon, _ = bench_daemon(
                settings, stream_arn=table.stream_arn, worker_id="bench", child=(module,)
            )
            consumers.append(_Consumer(label, module, settings, daemon))
        real, null = consumers
        # The cleanup's retry queue exists before any child starts (a setup command's job).
        budget = real.settings.array.retry_budget_seconds
        ensure_retry_queues(
            _client(endpoint, "sqs"),
            real.settings.cleanup.retry_queue_name,
            visibility_timeout_seconds=int(budget * 3) + 30,
        )

        _write_records(dynamodb, table.table_name, WARM_UP)
        warm_up_end = int(stream_sequence_numbers(streams, table.stream_arn)[-1])
        started = time.monotonic()
        for consumer in consumers:
            consumer.daemon.start()
        try:
            for consumer in consumers:
                _wait(
                    consumer.checkpointed(dynamodb, warm_up_end),
                    START_TIMEOUT,
                    f"the {consumer.label} child's warm-up checkpoint",
                )
                assert consumer.daemon.pid is not None
                consumer.child = child_pid(consumer.daemon.pid, consumer.module)
                if consumer.child is None:
                    raise SystemExit(f"bench_child: the {consumer.label} child process was not found")

            cold_start = time.monotonic() - started
            for consumer in consumers:
                assert consumer.daemon.pid is not None
                os.kill(consumer.daemon.pid, signal.SIGSTOP)
            try:
                time.sleep(1.0)  # a call sent before the pause is answered; then each child waits on stdin
                for consumer in consumers:
                    consumer.started_cpu = consumer.read_cpu()
                _write_records(dynamodb, table.table_name, BACKLOG)
                numbers = stream_sequence_numbers(streams, table.stream_arn)
            finally:
                for consumer in consumers:
                    assert consumer.daemon.pid is not None
                    os.kill(consumer.daemon.pid, signal.SIGCONT)
            resumed = time.monotonic()
            backlog = [n for n in numbers if int(n) > warm_up_end]
            backlog_end = int(backlog[-1])

            def all_done() -> bool:
                for consumer in consumers:
                    if consumer.done_cpu is None and consumer.checkpointed(dynamodb, backlog_end)():
                        consumer.done_cpu = consumer.read_cpu()
                        consumer.done_at = time.monotonic() - resumed
                return all(consumer.done_cpu is not None for consumer in consumers)

            _wait(all_done, START_TIMEOUT, "both children to checkpoint the backlog")
        finally:
            # Both at once: a graceful KCL shutdown takes tens of seconds. The real child's lake was
            # flushed before its last checkpoint, so a daemon killed after the timeout loses nothing here.
            with ThreadPoolExecutor(len(consumers)) as pool:
                list(pool.map(lambda consumer: consumer.daemon.stop(timeout=STOP_TIMEOUT), consumers))

        with connect(lake_from_settings(real.settings)) as con:
            landed = con.execute("SELECT count(*), count(DISTINCT sequence_number) FROM changes").fetchone()
        if landed is None or landed[0] != len(numbers) or landed[1] != len(numbers):
            raise SystemExit(
                f"bench_child: the real child's lake holds {landed} rows, the stream {len(numbers)}"
            )
        return real, null, len(backlog), cold_start


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-child-") as tmp:
        real, null, records, cold_start = _run(Path(tmp))

    def per_record_us(consumer: _Consumer) -> float:
        assert consumer.done_cpu is not None
        precise = consumer.done_cpu[0] - consumer.started_cpu[0]
        ticks = consumer.done_cpu[1] - consumer.started_cpu[1]
        if abs(precise - ticks) > 0.03 + 0.1 * ticks:  # a thread that ended took its runtime with it
            print(
                f"  (warning: {consumer.label} child: {precise:.3f} s by schedstat, {ticks:.2f} s by ticks)"
            )
        return precise / records * 1e6

    real_us, null_us = per_record_us(real), per_record_us(null)
    print_figures(
        f"KCL child CPU per record through the real daemon (launcher JVM, moto): a {records:,}-record "
        "backlog read by both children in one run, production commit cadence",
        [
            Comparison(
                name="entitlements.child (protocol, decode, cleanup + lake handlers, commits)",
                value=real_us,
                unit="µs CPU/record",
                baseline_name="a do-nothing kclpy child checkpointing at the same cadence",
                baseline_value=null_us,
                better="lower",
                target="none here (a backlog; the 100 µs target is at live traffic: bench consumer)",
            ),
            Comparison(
                name=f"start-up: imports, clients, the first {WARM_UP} records and their checkpoint",
                value=real.started_cpu[0],
                unit="s CPU",
                baseline_name="the do-nothing child",
                baseline_value=null.started_cpu[0],
                better="lower",
            ),
        ],
    )
    assert real.done_at is not None and null.done_at is not None
    print(
        f"  (the child's own work, the protocol taken out: {real_us - null_us:,.1f} µs/record; the backlog "
        f"checkpointed {real.done_at:,.1f} s / {null.done_at:,.1f} s after the JVMs resumed, the last "
        "commit coming up to the commit interval after the last record)"
    )
    print(f"  (cold start of both daemons to their warm-up checkpoints: {cold_start:,.0f} s)")


if __name__ == "__main__":
    main()

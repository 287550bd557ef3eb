"""Exactly once in the lake's tables through the real daemon, for outside readers, while it runs.

The real consumer (Java launcher, Python children, the lake handler and the cleanup handler against the
fake Array, TTL expiries from the emulator) takes a steady load; the Python child is killed with
SIGKILL, then the worker's lake writer (the process committing the children's flushes: the daemon
starts another and the flushes are retried on it), then the whole JVM, each time with writes and cleanups
under way, and the worker is started again after the child's and the JVM's. Every two seconds meanwhile
`changes` and `outcomes` are read with deltalake's reader, Polars and
DuckDB's `delta_scan` (not the project's views, which dedupe): at every sample each reader sees as many
rows as distinct identities ((stream_arn, shard_id, sequence_number) in `changes`, outcome_id in
`outcomes`). Once the load has run out and every expiry is decided, each reader holds every stream event
exactly once, and the views' dedupe removes nothing.

Each kill comes while a cleanup's Array delete is held and after `changes` took a commit since: the rows
after the slow cleanup have landed while the checkpoint stays below it, so the restarted worker delivers
them again (the journal shows events delivered by two children), a replay the tables' high-water marks
must drop (analytics/lake/_high_water.py). The retry worker is not run: an expiry
parked for it is decided for this test, since its consumer writes nothing more for it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from analytics.lake import Lake
from analytics.lake._duck import literal, load_delta_extension
from analytics.lake._schema import CHANGES, OUTCOMES
from analytics.lake.views import duplicates_removed
from devstack import _writes as writes
from devstack.fake_array import DELETE_USER
from devstack.moto_server import MotoServer
from devstack.streams import read_stream_by_shard
from devstack.ttl_emulator import TTL_IDENTITY
from schema.outcomes import FINAL_CLEANUP_OUTCOMES, OutcomeKind
from schema.table import EntitlementStatus
from tests.support.kcl import (
    CleanupStack,
    aws_client,
    cleanup_stack,
    dynamodb,
    python_children,
)

pytestmark = pytest.mark.kcl

SAMPLE_EVERY = 2.0  # seconds between two samples of the tables
WRITES_PER_SECOND = 25
EXPIRY_EVERY = 4  # at most one write in four is an expiring signup (while some are asked for)
EXPIRIES_PER_RUN = 10  # expiring signups asked for once a run delivers
IDENTITY = {CHANGES: ("stream_arn", "shard_id", "sequence_number"), OUTCOMES: ("outcome_id",)}
READERS = ("deltalake", "polars", "duckdb")

Identity = tuple[object, ...]


def read_identities(lake: Lake, name: str, reader: str) -> list[Identity]:
    """Every row's identity in table `name` at its latest version, as `reader` reads the Delta table."""
    uri = lake.table_uri(name)
    options = dict(lake.storage_options) or None
    columns = list(IDENTITY[name])
    if reader == "deltalake":
        rows = DeltaTable(uri, storage_options=options).to_pyarrow_table(columns=columns)
    elif reader == "polars":
        rows = pl.read_delta(uri, columns=columns, storage_options=options).to_arrow()
    else:
        rows = _duckdb().sql(f"SELECT {', '.join(columns)} FROM delta_scan({literal(uri)})").to_arrow_table()
    return _tuples(rows, columns)


_connections = threading.local()


def _duckdb() -> duckdb.DuckDBPyConnection:
    """This thread's DuckDB connection with the delta extension: loading it takes a second or two, and
    each `delta_scan` reads the table's latest version whatever the connection read before."""
    con: duckdb.DuckDBPyConnection | None = getattr(_connections, "con", None)
    if con is None:
        con = duckdb.connect()
        load_delta_extension(con)
        _connections.con = con
    return con


def _tuples(rows: pa.Table, columns: list[str]) -> list[Identity]:
    return list(zip(*(rows[c].to_pylist() for c in columns), strict=True))


@dataclass
class Sampler:
    """Reads both tables with every reader every `SAMPLE_EVERY` seconds on a thread of its own, keeping
    each sample whose rows outnumber its distinct identities, and any reader's failure."""

    lake: Lake
    samples: int = 0
    rows_seen: dict[tuple[str, str], int] = field(default_factory=dict)  # (table, reader) -> most rows
    duplicates: list[tuple[str, str, int, int]] = field(default_factory=list)  # table, reader, rows, distinct
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # table, reader, error type
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        for name in (CHANGES, OUTCOMES):
            for reader in READERS:
                try:
                    identities = read_identities(self.lake, name, reader)
                except TableNotFoundError:
                    continue  # the consumer has not committed to it yet
                except Exception as error:  # the test reports it
                    if self.lake.is_local and not Path(self.lake.path(name), "_delta_log").exists():
                        continue  # no table yet, as DuckDB and Polars say it
                    self.failures.append((name, reader, type(error).__name__))
                    continue
                if len(identities) != len(set(identities)):
                    self.duplicates.append((name, reader, len(identities), len(set(identities))))
                seen = self.rows_seen.get((name, reader), 0)
                self.rows_seen[name, reader] = max(seen, len(identities))
        self.samples += 1

    def __enter__(self) -> Sampler:
        def run() -> None:
            while not self._stop.wait(SAMPLE_EVERY):
                self.sample()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=60)


@dataclass
class Load:
    """Writes at `WRITES_PER_SECOND` on a thread until stopped (see `write_until`)."""

    stop: threading.Event = field(default_factory=threading.Event)
    expiring: int = 0  # expiring signups written so far
    wanted: int = 0  # expiring signups asked for so far
    thread: threading.Thread | None = None

    def expire(self, count: int) -> None:
        """Ask for `count` more expiring signups among the next writes."""
        self.wanted += count

    def end(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join()


def write_until_stopped(stack: CleanupStack) -> Load:
    """Plain writes at `WRITES_PER_SECOND`; while expiring signups are asked for (`Load.expire`), every
    `EXPIRY_EVERY`-th is preceded by a signup whose account Array knows, cancelled at once with a TTL a
    second ahead, so that its cancellation record expires and is cleaned up during the load. Each row is
    new: a put that changes nothing writes no stream record."""
    load = Load()

    def run() -> None:
        table = dynamodb(stack.endpoint)
        i = 0
        while not load.stop.is_set():
            if i % EXPIRY_EVERY == 0 and load.expiring < load.wanted:
                user, account = f"expiring-{i}", f"acct-expiring-{i}"
                now = datetime.now(UTC)
                stack.array.add_users([account])
                row = writes.entitlement_row(
                    user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=now
                )
                table.put_item(**writes.signup_put(stack.table, row))
                ttl = {"N": str(int(now.timestamp()) + 1)}
                table.transact_write_items(
                    TransactItems=writes.cancellation_transaction(
                        stack.table, user, account, ttl=ttl, now=now
                    )
                )
                load.expiring += 1
            table.put_item(
                TableName=stack.table,
                Item={
                    "pk": {"S": f"USER#load-{i}"},
                    "sk": {"S": "ENTITLEMENT#acct"},
                    "userId": {"S": f"load-{i}"},
                    "arrayAccountId": {"S": "acct"},
                    "status": {"S": "Active"},
                },
            )
            i += 1
            time.sleep(1 / WRITES_PER_SECOND)

    load.thread = threading.Thread(target=run, daemon=True)
    load.thread.start()
    return load


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def journal_events(stack: CleanupStack) -> list[dict[str, Any]]:
    """The journal's whole lines: read while a child appends (its last line may be unfinished), and a
    child killed mid-append leaves a torn line that the next run's lines follow."""
    path = stack.consumer.journal
    if not path.exists():
        return []
    events = []
    for line in path.read_text().split("\n")[:-1]:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def pids_delivering(stack: CleanupStack) -> set[int]:
    return {int(str(event["pid"])) for event in journal_events(stack)}


def table_version(lake: Lake, name: str) -> int:
    try:
        return int(
            DeltaTable(lake.table_uri(name), storage_options=dict(lake.storage_options) or None).version()
        )
    except TableNotFoundError:
        return -1


def kill_under_load(
    stack: CleanupStack, load: Load, kill: Callable[[], None], run: int, *, restart: bool = True
) -> set[int]:
    """Hold Array's next delete and ask for `EXPIRIES_PER_RUN` expiring signups (written while the run
    starts, so its backlog holds them); once this run's first delete is held and `changes` has taken a
    commit since (the rows after the slow cleanup land; the checkpoint stays below it), `kill`, let the
    held delete go on, and start the worker again. The restarted run delivers again what the lake holds
    above the checkpoint: a replay the tables must drop. Returns the children that delivered until the
    kill."""
    release = f"release-{run}"
    held = stack.array.hold(DELETE_USER, until=release)
    load.expire(EXPIRIES_PER_RUN)
    assert held.wait_arrived(120), "no cleanup reached Array"
    version = table_version(stack.lake, CHANGES)
    wait_until(lambda: table_version(stack.lake, CHANGES) > version, 30, "a commit past the held cleanup")
    delivered = pids_delivering(stack)
    kill()
    stack.array.hooks.set(release)
    if restart:
        stack.consumer.start_worker("worker-1")
    return delivered


def kill_the_child(stack: CleanupStack) -> None:
    daemon = stack.consumer.daemons["worker-1"]
    for pid in python_children(daemon):
        os.kill(pid, signal.SIGKILL)
    daemon.wait(timeout=60)  # a dead child takes the daemon down with it (the multilang contract)


def kill_the_jvm(stack: CleanupStack) -> None:
    stack.consumer.daemons["worker-1"].kill()  # SIGKILL of the launcher's process group


def kill_the_lake_writer(stack: CleanupStack) -> None:
    """SIGKILL the worker's lake writer, the process that commits the children's flushes (mid-commit
    or between two); its daemon starts another, and the children's flushes are retried on it."""
    pid = stack.consumer.daemons["worker-1"].writer_pid
    assert pid is not None, "the worker runs no lake writer"
    os.kill(pid, signal.SIGKILL)


def stream_identities(stack: CleanupStack) -> set[Identity]:
    streams = aws_client(stack.endpoint, "dynamodbstreams")
    arn = stack.consumer.stream_arn
    return {
        (arn, shard, record["dynamodb"]["SequenceNumber"])
        for shard, record in read_stream_by_shard(streams, arn)
    }


def expiries(stack: CleanupStack) -> set[str]:
    """The event ids of the stream's TTL deletions of cleanup records."""
    streams = aws_client(stack.endpoint, "dynamodbstreams")
    return {
        record["eventID"]
        for _, record in read_stream_by_shard(streams, stack.consumer.stream_arn)
        if record["eventName"] == "REMOVE" and record.get("userIdentity") == TTL_IDENTITY
    }


def decided_expiries(lake: Lake) -> set[str]:
    """Source event ids the cleanup has decided in `outcomes` (deltalake's reader): a final outcome, or
    parked for the retry worker (which this test does not run), after which it writes nothing more."""
    try:
        table = DeltaTable(lake.table_uri(OUTCOMES), storage_options=dict(lake.storage_options) or None)
    except TableNotFoundError:
        return set()
    rows = table.to_pyarrow_table(columns=["source_event_id", "kind"]).to_pylist()
    decided = {kind.value for kind in FINAL_CLEANUP_OUTCOMES} | {OutcomeKind.CLEANUP_PARKED.value}
    return {str(row["source_event_id"]) for row in rows if row["kind"] in decided}


def landed_changes(lake: Lake) -> set[Identity]:
    try:
        return set(read_identities(lake, CHANGES, "deltalake"))
    except TableNotFoundError:
        return set()


def test_through_kill_nines_of_the_child_and_the_jvm_every_reader_sees_each_row_once_at_every_sample(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    with cleanup_stack(moto_server, tmp_path) as stack, Sampler(stack.lake) as sampler:
        load = write_until_stopped(stack)
        try:
            kill_under_load(stack, load, lambda: kill_the_child(stack), run=1)
            kill_under_load(stack, load, lambda: kill_the_lake_writer(stack), run=2, restart=False)
            delivered = kill_under_load(stack, load, lambda: kill_the_jvm(stack), run=3)
        finally:
            load.end()
        wait_until(lambda: bool(pids_delivering(stack) - delivered), 90, "the third run delivering")
        wait_until(lambda: stack.emulator.deleted_total >= load.expiring, 60, "the expiries")
        expired = expiries(stack)
        assert len(expired) == load.expiring
        wait_until(lambda: expired <= decided_expiries(stack.lake), 90, "the cleanup of every expiry")
        # The cleanups' own writes (rows marked Removed) are in the stream by now.
        expected = stream_identities(stack)
        wait_until(lambda: expected <= landed_changes(stack.lake), 90, "every stream event in changes")
        sampler.sample()  # one more sample, of the finished lake

    journal = journal_events(stack)
    runs_per_event: dict[str, set[int]] = {}
    for event in journal:
        runs_per_event.setdefault(str(event["event_id"]), set()).add(int(str(event["pid"])))
    assert any(len(runs) > 1 for runs in runs_per_event.values())  # the kills made replays
    assert sampler.failures == []
    assert sampler.duplicates == []  # at every sample, rows = distinct identities, for every reader
    assert sampler.samples >= 10
    for reader in READERS:  # each reader's samples read the tables' rows, up to the finished lake
        assert sampler.rows_seen[CHANGES, reader] >= len(expected), reader
        assert sampler.rows_seen[OUTCOMES, reader] > 0, reader
    landed = {reader: read_identities(stack.lake, CHANGES, reader) for reader in READERS}
    outcomes = {reader: read_identities(stack.lake, OUTCOMES, reader) for reader in READERS}
    in_stream = stream_identities(stack)  # read after the lake: whatever landed came from it
    for reader in READERS:
        assert len(landed[reader]) == len(set(landed[reader])), reader  # each event once
        assert expected <= set(landed[reader]) <= in_stream, reader  # every stream event, nothing foreign
        assert len(outcomes[reader]) == len(set(outcomes[reader])), reader
    assert len({frozenset(found) for found in outcomes.values()}) == 1  # the readers agree
    assert duplicates_removed(stack.lake) == {CHANGES: 0, OUTCOMES: 0}

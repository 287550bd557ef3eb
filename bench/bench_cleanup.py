"""`make bench` / `python -m bench cleanup`: Array account cleanups per second.

The figure: `CleanupHandler.flush()` on a batch of expiries (the production path: the in-use guard's GSI1
query, the delete at Array, the conditional mark of the row Removed, one outcome each), the batch's cleanups
run `ArraySettings.concurrency` (8) at a time, against the fake Array answering every call after a fixed
20 ms and moto (in its own process) for the table and the retry queue. Baseline, in the same run: the same
handler on the same kind of batch with concurrency 1, so the same calls made one at a time.

A second pair isolates Array: the HTTP client's deletes alone, 8 at a time beside one at a time.

A third, "rework" (issue 22): 11 seeded kills of a subprocess running the handler's windows (odd ones
during a flush, even ones after a flush before its outcomes reached the lake file), then the retry worker,
with the fake Array failing 10% of calls and timing out 5%: DELETE calls repeated after Array had answered
one for the account, against the answered calls whose final note a kill cut off (the bound), accounts with
two final outcomes (0) and accounts left (0).

A fourth pair, "lanes" (issue 22 item 1): the same flush on the handler's 8 lanes (`pipeline.lanes`) beside
1 lane, against the fake Array at 20 ms a call and an in-process table answering after 5 ms a call with no
lock shared between calls (as DynamoDB answers): moto serialises every call under one lock (2.7 to 5.6 ms a
call on 2 cores), which holds the moto figure above well under 8x whatever runs the batch (3.13x in issue
22's run, 4.96x in one at load 29: the one-at-a-time baseline slows more under load). Target: >= 6x. And
one slow account through the shard consumer: a window of 200 where one account's delete answers after
10 s, on the production lanes (8) and slow-after (`ConsumerSettings.lane_slow_after_seconds`): when the
other 199 outcomes reached the sink, against when the slow one's did, and the checkpoint below the slow
record until it finished (target: the others before the slow answer, the checkpoint never past it).

Each throughput figure is the best of three batches (a fresh table, accounts and rows each time: a
cleanup deletes them, and moto's GSI query reads the whole table). Every run is checked: every account
deleted, the rows Removed, nothing parked.
"""

from __future__ import annotations

__all__ = ["main"]

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from adapters import HttpArrayClient
from bench._moto import moto_client, moto_server
from bench._report import Comparison, print_figures
from config import ArraySettings, ConsumerSettings
from devstack.fake_array import DELETE_USER, FakeArrayServer
from pipeline import (
    ChangeKind,
    CleanupExpired,
    CommitPolicy,
    DeadLetters,
    HandlerRegistry,
    ParkedWork,
    Quarantine,
    RawRecord,
    ShardConsumer,
    StreamEvent,
    StreamPosition,
    create_table,
)
from processors.cleanup import (
    CleanupHandler,
    LocalDeletionNotes,
    RetryWorker,
    ensure_retry_queues,
    flush_call_bounds,
)
from schema.clock import SystemClock
from schema.outcomes import OutcomeEvent, OutcomeKind
from schema.table import CleanupRecord, ItemKind, entitlement_key, gsi1_key, stale_key

LATENCY_SECONDS = 0.020
CONCURRENCY = 8
BATCH = 200
REPEATS = 3
STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements-bench/stream/2026-01-01T00:00:00.000"


def _client(endpoint: str, service: str) -> Any:
    return moto_client(
        endpoint,
        service,
        Config(
            retries={"mode": "standard", "max_attempts": 3},
            max_pool_connections=CONCURRENCY * 2,
            connect_timeout=2,
            read_timeout=5,
        ),
    )


class _CountingSink:
    def __init__(self) -> None:
        self.kinds: list[OutcomeKind] = []

    def add_outcome(self, outcome: OutcomeEvent) -> None:
        self.kinds.append(outcome.kind)


_sequence = iter(range(10**20, 10**21))


def _key(user: str, account: str) -> dict[str, Any]:
    return dict(stale_key(user, account))


def _expiry(user: str, account: str) -> CleanupExpired:
    key = _key(user, account)
    record = CleanupRecord(kind=ItemKind.STALE, userId=user, arrayAccountId=account, ttl=1_770_000_000, **key)
    return CleanupExpired(
        event_id=uuid.uuid4().hex,
        change=ChangeKind.REMOVE,
        position=StreamPosition(
            stream_arn=STREAM_ARN, shard_id="shardId-bench", sequence_number=str(next(_sequence))
        ),
        created_at=datetime.now(UTC),
        keys=key,
        item_kind=ItemKind.STALE,
        user_id=user,
        old_item=record,
    )


def _seed(dynamodb: Any, table: str, array: FakeArrayServer, count: int) -> list[tuple[str, str]]:
    """Fresh (user, account) pairs: a Superseded row naming each account, the account at Array."""
    tag = uuid.uuid4().hex[:6]
    pairs = [(f"user-{tag}-{i:04d}", f"acct-{tag}-{i:04d}") for i in range(count)]
    for start in range(0, count, 25):
        dynamodb.batch_write_item(
            RequestItems={
                table: [
                    {
                        "PutRequest": {
                            "Item": {
                                name: {"S": value}
                                for name, value in {
                                    **entitlement_key(user, account),
                                    **gsi1_key(account),
                                    "userId": user,
                                    "arrayAccountId": account,
                                    "status": "Superseded",
                                }.items()
                            }
                        }
                    }
                    for user, account in pairs[start : start + 25]
                ]
            }
        )
    array.add_users(account for _user, account in pairs)
    return pairs


def _check(dynamodb: Any, table: str, array: FakeArrayServer, pairs: list[tuple[str, str]]) -> None:
    deleted = set(array.deleted_users())
    if any(account not in deleted for _user, account in pairs):
        raise SystemExit("bench_cleanup: an account was not deleted")
    for user, account in pairs[:: max(1, len(pairs) // 20)]:
        item = dynamodb.get_item(
            TableName=table, Key={k: {"S": v} for k, v in entitlement_key(user, account).items()}
        )["Item"]
        if item["status"]["S"] != "Removed":
            raise SystemExit("bench_cleanup: a row was not marked Removed")


def _best_rate(run: Callable[[], tuple[float, int]]) -> float:
    """The best cleanups/s of REPEATS runs; `run` sets up untimed and returns (seconds, cleanups)."""
    best = 0.0
    for _ in range(REPEATS):
        seconds, count = run()
        best = max(best, count / seconds)
    return best


def main() -> None:
    with moto_server() as endpoint, FakeArrayServer(host="127.0.0.1", port=0) as array:
        dynamodb, sqs = _client(endpoint, "dynamodb"), _client(endpoint, "sqs")
        queues = ensure_retry_queues(sqs, f"cleanup-bench-{uuid.uuid4().hex[:6]}")
        array.set_faults(latency_seconds=LATENCY_SECONDS)
        settings = ArraySettings(base_url=array.url, concurrency=CONCURRENCY, retry_budget_seconds=60.0)

        with HttpArrayClient(settings) as client:

            def flush_run(concurrency: int) -> Callable[[], tuple[float, int]]:
                def run() -> tuple[float, int]:
                    # A fresh table each run: moto's GSI query reads the whole table, so every run gets
                    # the same size of table.
                    table = create_table(dynamodb, f"entitlements-bench-{uuid.uuid4().hex[:6]}").table_name
                    pairs = _seed(dynamodb, table, array, BATCH)
                    sink = _CountingSink()
                    handler = CleanupHandler(
                        dynamodb=dynamodb,
                        sqs=sqs,
                        array=client,
                        table_name=table,
                        retry_queue_url=queues.queue_url,
                        sink=sink,
                        clock=SystemClock(),
                        concurrency=concurrency,
                        retry_budget_seconds=settings.retry_budget_seconds,
                    )
                    for user, account in pairs:
                        handler.add(_expiry(user, account))
                    started = time.perf_counter()
                    handler.flush()
                    seconds = time.perf_counter() - started
                    if sink.kinds.count(OutcomeKind.CLEANUP_DELETED) != BATCH or handler.stats.parked:
                        raise SystemExit("bench_cleanup: a cleanup did not finish")
                    _check(dynamodb, table, array, pairs)
                    return seconds, BATCH

                return run

            def delete_run(concurrency: int) -> Callable[[], tuple[float, int]]:
                def run() -> tuple[float, int]:
                    accounts = [f"bare-{uuid.uuid4().hex[:12]}" for _ in range(BATCH)]
                    array.add_users(accounts)
                    started = time.perf_counter()
                    with ThreadPoolExecutor(concurrency) as pool:
                        list(pool.map(client.delete_user, accounts))
                    seconds = time.perf_counter() - started
                    if any(array.has_user(account) for account in accounts):
                        raise SystemExit("bench_cleanup: a bare delete did not happen")
                    return seconds, BATCH

                return run

            concurrent = _best_rate(flush_run(CONCURRENCY))
            one_at_a_time = _best_rate(flush_run(1))
            bare_concurrent = _best_rate(delete_run(CONCURRENCY))
            bare_one_at_a_time = _best_rate(delete_run(1))
            lanes = _best_rate(lanes_run(array, client, sqs, queues.queue_url, LANES))
            one_lane = _best_rate(lanes_run(array, client, sqs, queues.queue_url, 1))
        slow = run_slow_account(array, sqs, queues.queue_url)

        with tempfile.TemporaryDirectory(prefix="rework-") as folder:
            rework = run_rework(endpoint, Path(folder))

    latency_ms = f"{LATENCY_SECONDS * 1000:.0f} ms"
    print_figures(
        f"Array account cleanup: {BATCH} expiries per flush, fake Array at {latency_ms} per call, "
        f"moto in its own process (best of {REPEATS})",
        [
            Comparison(
                name=f"CleanupHandler.flush, {CONCURRENCY} at a time (guard + delete + mark)",
                value=concurrent,
                unit="cleanups/s",
                baseline_name="the same handler, one at a time",
                baseline_value=one_at_a_time,
                target="none: moto serves every table call under one lock (the lanes figure has it)",
            ),
            Comparison(
                name=f"HttpArrayClient.delete_user alone, {CONCURRENCY} at a time",
                value=bare_concurrent,
                unit="deletes/s",
                baseline_name="one at a time",
                baseline_value=bare_one_at_a_time,
                target="none: the Array client's own ceiling, beside the flush above",
            ),
        ],
    )
    print_figures(
        f"Cleanup in lanes: {BATCH} expiries per flush, fake Array at {latency_ms} per call, an in-process "
        f"table at {TABLE_LATENCY_SECONDS * 1000:.0f} ms per call (no shared lock; best of {REPEATS})",
        [lanes_figure(lanes, one_lane), slow_account_figure(slow)],
    )
    print_figures(
        f"Rework under {rework.kills} seeded kills (half during a flush), Array failing 10% (5xx) and "
        "timing out 5% (applied, answer lost)",
        [rework_figure(rework)],
    )
    print(
        f"  (one call at a time cannot beat {1 / LATENCY_SECONDS:,.0f}/s at {latency_ms}; "
        f"{CONCURRENCY} at a time, {CONCURRENCY / LATENCY_SECONDS:,.0f}/s)"
    )


# -- lanes (issue 22 item 1) ------------------------------------------------------------------------

LANES = 8
LANES_TARGET = 6.0
TABLE_LATENCY_SECONDS = 0.005
SLOW_ANSWER_SECONDS = 10.0
SLOW_INDEX = 50  # the slow account's place in its window


class _LatencyTable:
    """The table calls a cleanup makes (GSI1's query, the conditional mark, its read back), each answered
    after a fixed latency with no lock held while it waits: a table whose calls do not queue behind each
    other (DynamoDB), unlike moto's. Rows by GSI1 key: (pk, sk, account, status)."""

    def __init__(self, latency: float) -> None:
        self._latency = latency
        self._lock = threading.Lock()
        self._rows: dict[str, list[dict[str, str]]] = {}

    def seed(self, pairs: list[tuple[str, str]]) -> None:
        with self._lock:
            for user, account in pairs:
                row = {**entitlement_key(user, account), "arrayAccountId": account, "status": "Superseded"}
                self._rows.setdefault(gsi1_key(account)["gsi1pk"], []).append(row)

    def statuses(self) -> list[str]:
        with self._lock:
            return [row["status"] for rows in self._rows.values() for row in rows]

    def query(self, **request: Any) -> Any:
        time.sleep(self._latency)
        with self._lock:
            rows = self._rows.get(request["ExpressionAttributeValues"][":gpk"]["S"], [])
            return {"Items": [{name: {"S": value} for name, value in row.items()} for row in rows]}

    def get_item(self, **request: Any) -> Any:
        time.sleep(self._latency)
        with self._lock:
            row = self._find(request["Key"])
            return {"Item": {name: {"S": value} for name, value in row.items()}} if row else {}

    def update_item(self, **request: Any) -> Any:
        time.sleep(self._latency)
        values = request["ExpressionAttributeValues"]
        with self._lock:
            row = self._find(request["Key"])
            if row is None or row["arrayAccountId"] != values[":acct"]["S"] or row["status"] == "Removed":
                refusal = {"Error": {"Code": "ConditionalCheckFailedException", "Message": "refused"}}
                raise ClientError(refusal, "UpdateItem")
            row["status"] = values[":removed"]["S"]
        return {}

    def _find(self, key: dict[str, Any]) -> dict[str, str] | None:
        pk, sk = key["pk"]["S"], key["sk"]["S"]
        for rows in self._rows.values():
            for row in rows:
                if row["pk"] == pk and row["sk"] == sk:
                    return row
        return None


def _latency_table(count: int, array: FakeArrayServer) -> tuple[_LatencyTable, list[tuple[str, str]]]:
    """A fresh table holding a Superseded row for each of `count` new accounts, and the accounts at Array."""
    table = _LatencyTable(TABLE_LATENCY_SECONDS)
    tag = uuid.uuid4().hex[:6]
    pairs = [(f"user-{tag}-{i:04d}", f"acct-{tag}-{i:04d}") for i in range(count)]
    table.seed(pairs)
    array.add_users(account for _user, account in pairs)
    return table, pairs


def lanes_run(
    array: FakeArrayServer, client: HttpArrayClient, sqs: Any, queue_url: str, lanes: int
) -> Callable[[], tuple[float, int]]:
    """One flush of BATCH expiries on `lanes` lanes, the table answering after TABLE_LATENCY_SECONDS."""

    def run() -> tuple[float, int]:
        table, pairs = _latency_table(BATCH, array)
        sink = _CountingSink()
        handler = CleanupHandler(
            dynamodb=table,
            sqs=sqs,
            array=client,
            table_name="entitlements-bench",
            retry_queue_url=queue_url,
            sink=sink,
            clock=SystemClock(),
            concurrency=lanes,
            retry_budget_seconds=60.0,
        )
        for user, account in pairs:
            handler.add(_expiry(user, account))
        started = time.perf_counter()
        handler.flush()
        seconds = time.perf_counter() - started
        if sink.kinds.count(OutcomeKind.CLEANUP_DELETED) != BATCH or handler.stats.parked:
            raise SystemExit("bench_cleanup lanes: a cleanup did not finish")
        if table.statuses() != ["Removed"] * BATCH or array.users() & {a for _u, a in pairs}:
            raise SystemExit("bench_cleanup lanes: an account or a row was left")
        return seconds, BATCH

    return run


@dataclass(frozen=True)
class SlowAccount:
    others_seconds: float  # the window's start to the last of the other outcomes at the sink
    slow_seconds: float  # the window's start to the slow account's outcome at the sink
    checkpoint_held: bool  # the first commit checkpointed just below the slow record, not past it
    checkpoint_passed: bool  # once it finished, a later commit checkpointed the window's last record


class _TimedSink:
    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str, OutcomeKind]] = []

    def add_outcome(self, outcome: OutcomeEvent) -> None:
        self.arrivals.append((time.perf_counter(), outcome.array_account_id or "", outcome.kind))


def run_slow_account(array: FakeArrayServer, sqs: Any, queue_url: str) -> SlowAccount:
    """A window of BATCH expiries through the shard consumer, one account's delete answered after 10 s
    (held at the fake Array), on the production lanes and slow-after."""
    table, pairs = _latency_table(BATCH, array)
    slow_account = pairs[SLOW_INDEX][1]
    events = {event.position.sequence_number: event for event in (_expiry(u, a) for u, a in pairs)}
    window = [RawRecord(sequence.encode(), sequence) for sequence in events]

    def decode(data: bytes, **_where: Any) -> StreamEvent:
        return events[data.decode()]

    sink = _TimedSink()
    settings = ArraySettings(base_url=array.url, timeout_seconds=SLOW_ANSWER_SECONDS + 5)
    checkpoints: list[str | None] = []
    with HttpArrayClient(settings) as client, tempfile.TemporaryDirectory(prefix="lanes-") as folder:
        handler = CleanupHandler(
            dynamodb=table,
            sqs=sqs,
            array=client,
            table_name="entitlements-bench",
            retry_queue_url=queue_url,
            sink=sink,
            clock=SystemClock(),
            concurrency=settings.concurrency,
            retry_budget_seconds=settings.retry_budget_seconds,
            slow_after_seconds=ConsumerSettings().lane_slow_after_seconds,
        )
        registry = HandlerRegistry()
        registry.register(handler)
        root = Path(folder)
        consumer = ShardConsumer(
            stream_arn=STREAM_ARN,
            handlers=registry,
            decode=decode,
            quarantine=Quarantine(root / "quarantine"),
            parked=ParkedWork(root / "parked"),
            dead_letters=DeadLetters(root / "dead"),
            commit=CommitPolicy(every_records=10**6, interval_seconds=3600),
        )
        consumer.start("shardId-bench")
        array.hold(DELETE_USER, until="slow-answers", key=slow_account)
        answer = threading.Timer(SLOW_ANSWER_SECONDS, array.hooks.set, args=("slow-answers",))
        started = time.perf_counter()
        answer.start()
        consumer.process(window, checkpoints.append)
        consumer.commit(checkpoints.append)
        held = checkpoints == [window[SLOW_INDEX - 1].sequence_number]
        consumer.commit(checkpoints.append, settle=True)
        answer.join()
    passed = checkpoints[-1:] == [window[-1].sequence_number]
    deleted = [(at, account) for at, account, kind in sink.arrivals if kind is OutcomeKind.CLEANUP_DELETED]
    if len(deleted) != BATCH or table.statuses() != ["Removed"] * BATCH:
        raise SystemExit("bench_cleanup lanes: a cleanup of the slow-account window did not finish")
    return SlowAccount(
        others_seconds=max(at for at, account in deleted if account != slow_account) - started,
        slow_seconds=next(at for at, account in deleted if account == slow_account) - started,
        checkpoint_held=held,
        checkpoint_passed=passed,
    )


def lanes_figure(lanes: float, one_lane: float) -> Comparison:
    return Comparison(
        name=f"lanes: CleanupHandler.flush on {LANES} lanes (guard + delete + mark)",
        value=lanes,
        unit="cleanups/s",
        baseline_name="one lane (one at a time)",
        baseline_value=one_lane,
        target=f"ratio >= {LANES_TARGET:g}",
        met=one_lane > 0 and lanes / one_lane >= LANES_TARGET,
    )


def slow_account_figure(slow: SlowAccount) -> Comparison:
    return Comparison(
        name=f"lanes, one slow account ({SLOW_ANSWER_SECONDS:g} s answer) through the consumer: the other "
        f"{BATCH - 1} outcomes at the sink after (checkpoint held below it: {slow.checkpoint_held}, "
        f"then passed: {slow.checkpoint_passed})",
        value=slow.others_seconds,
        unit="s",
        baseline_name="the slow account's outcome",
        baseline_value=slow.slow_seconds,
        better="lower",
        target=f"the others before the slow answer ({SLOW_ANSWER_SECONDS:g} s), the checkpoint never past it",
        met=slow.others_seconds < SLOW_ANSWER_SECONDS and slow.checkpoint_held and slow.checkpoint_passed,
    )


# -- rework: kills with Array faults (issue 22 item 2) -------------------------------------------------

REWORK_KILLS = 11
REWORK_WINDOW = 15
REWORK_WINDOWS = REWORK_KILLS + 2
# The client waits long enough that an answer Array gave without a fault is an answer the client saw,
# even on a loaded machine; the fake's timeout fault holds a request past that, then applies it.
_CLIENT_TIMEOUT_SECONDS = 1.5
_HANG_SECONDS = 2.0
_REWORK_BUDGET_SECONDS = 6.0
_FINAL_KINDS = {
    k.value
    for k in (
        OutcomeKind.CLEANUP_DELETED,
        OutcomeKind.CLEANUP_ALREADY_DELETED,
        OutcomeKind.CLEANUP_REFUSED_BY_GUARD,
        OutcomeKind.CLEANUP_FAILED,
    )
}


@dataclass(frozen=True)
class ReworkCounts:
    accounts: int
    delete_calls: int
    # DELETE calls of an account after Array had answered one for it (a 200/404 with no fault), each
    # counted by the answer that ended it
    repeated: int
    in_flight_at_kills: int  # the bound: answered requests whose final note a kill may have cut off
    two_finals: int  # accounts with two different final outcomes in the lake
    left_at_array: int  # accounts not deleted at the end (nothing lost: 0)
    kills: int


class _LakeFile:
    """The child's stand-in for the lake: outcomes appended, fsynced, one JSON line each, per window."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self.buffer: list[OutcomeEvent] = []

    def add_outcome(self, outcome: OutcomeEvent) -> None:
        self.buffer.append(outcome)

    def flush(self) -> None:
        lines = "".join(
            json.dumps({"account": o.array_account_id, "kind": o.kind.value, "event": o.source_event_id})
            + "\n"
            for o in self.buffer
        )
        with self._path.open("a", encoding="utf-8") as lake:
            lake.write(lines)
            lake.flush()
            os.fsync(lake.fileno())
        self.buffer.clear()


def _status(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def rework_child(config_path: str) -> None:
    """One process of the kill run: the stream's windows from the checkpoint on, each flushed by the
    cleanup handler, its outcomes written to the lake file, then the checkpoint; at the end the retry
    worker drains the queue. `hold` (a window) makes it wait, killed, after that window's flush."""
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    root = Path(config["root"])
    bounds = Config(**flush_call_bounds(_REWORK_BUDGET_SECONDS))
    dynamodb = moto_client(config["endpoint"], "dynamodb", bounds)
    sqs = moto_client(config["endpoint"], "sqs", bounds)
    expiries = [
        CleanupExpired(
            event_id=e["event"],
            change=ChangeKind.REMOVE,
            position=StreamPosition(
                stream_arn=STREAM_ARN, shard_id="shardId-rework", sequence_number=e["seq"]
            ),
            created_at=datetime.now(UTC),
            keys=stale_key(e["user"], e["account"]),
            item_kind=ItemKind.STALE,
            user_id=e["user"],
            old_item=CleanupRecord(
                kind=ItemKind.STALE,
                userId=e["user"],
                arrayAccountId=e["account"],
                ttl=1_770_000_000,
                **_key(e["user"], e["account"]),
            ),
        )
        for e in json.loads((root / "expiries.json").read_text(encoding="utf-8"))
    ]
    checkpoint = root / "checkpoint"
    start = int(checkpoint.read_text()) if checkpoint.exists() else 0
    lake = _LakeFile(root / "lake.jsonl")
    notes = LocalDeletionNotes(root / "notes")
    settings = ArraySettings(
        base_url=config["array"],
        timeout_seconds=_CLIENT_TIMEOUT_SECONDS,
        max_attempts=3,
        retry_budget_seconds=_REWORK_BUDGET_SECONDS,
        concurrency=8,
    )
    with HttpArrayClient(settings, backoff_base_seconds=0.01, backoff_max_seconds=0.05) as array:
        handler = CleanupHandler(
            dynamodb=dynamodb,
            sqs=sqs,
            array=array,
            table_name=config["table"],
            retry_queue_url=config["queue"],
            sink=lake,
            clock=SystemClock(),
            concurrency=8,
            retry_budget_seconds=_REWORK_BUDGET_SECONDS,
            deletion_notes=notes,
        )
        status = root / "status"
        for window in range(start, REWORK_WINDOWS):
            _status(status, f"flushing {window}")
            for event in expiries[window * REWORK_WINDOW : (window + 1) * REWORK_WINDOW]:
                handler.add(event)
            handler.flush()  # a RetryQueueError ends the process: the next one replays the window
            _status(status, f"flushed {window}")
            if window == config["hold"]:
                time.sleep(3600)  # killed here: the window's outcomes are not in the lake yet
            lake.flush()
            checkpoint.write_text(str(window + 1))
        worker = RetryWorker(
            sqs=sqs,
            dynamodb=dynamodb,
            array=array,
            table_name=config["table"],
            queue_url=config["queue"],
            sink=lake,
            clock=SystemClock(),
            flush_outcomes=lake.flush,
            repark_base_delay_seconds=0,
            wait_time_seconds=0,
            deletion_notes=notes,
        )
        worker.drain(max_seconds=60)
        _status(status, "done")


def _wait_for(path: Path, wanted: str, process: subprocess.Popen[bytes], seconds: float) -> bool:
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        if path.exists() and path.read_text(encoding="utf-8") == wanted:
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.005)
    return False


def run_rework(endpoint: str, root: Path, *, seed: int = 22) -> ReworkCounts:  # noqa: PLR0915 (one run, read top to bottom)
    """11 seeded kills, odd ones during a flush, even ones after a flush before its outcomes reached
    the lake, with Array failing 10% of calls (5xx) and timing out 5% (applied, answer lost)."""
    rng = random.Random(seed)
    bounds = Config(retries={"mode": "standard", "max_attempts": 3})
    dynamodb, sqs = moto_client(endpoint, "dynamodb", bounds), moto_client(endpoint, "sqs", bounds)
    table = create_table(dynamodb, f"entitlements-rework-{uuid.uuid4().hex[:6]}").table_name
    queue = ensure_retry_queues(sqs, f"cleanup-rework-{uuid.uuid4().hex[:6]}", visibility_timeout_seconds=10)
    with FakeArrayServer(host="127.0.0.1", port=0) as array:
        pairs = _seed(dynamodb, table, array, REWORK_WINDOW * REWORK_WINDOWS)
        events = [
            {"user": u, "account": a, "event": uuid.uuid4().hex, "seq": str(10**20 + i)}
            for i, (u, a) in enumerate(pairs)
        ]
        (root / "expiries.json").write_text(json.dumps(events), encoding="utf-8")
        array.set_faults(
            error_rate=0.10, timeout_rate=0.05, hang_seconds=_HANG_SECONDS, latency_seconds=0.005
        )
        notes = LocalDeletionNotes(root / "notes")
        by_account = {e["account"]: e["event"] for e in events}
        bound = 0
        kill_times: list[tuple[float, str]] = []

        def launch(hold: int) -> subprocess.Popen[bytes]:
            config = {
                "root": str(root),
                "endpoint": endpoint,
                "table": table,
                "queue": queue.queue_url,
                "array": array.url,
                "hold": hold,
            }
            (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
            (root / "status").unlink(missing_ok=True)
            return subprocess.Popen(
                [sys.executable, "-m", "bench.bench_cleanup", "rework-child", str(root / "config.json")],
                stdout=subprocess.DEVNULL,
            )

        for kill in range(REWORK_KILLS):
            checkpoint = root / "checkpoint"
            window = (int(checkpoint.read_text()) if checkpoint.exists() else 0) + 1
            during = kill % 2 == 1
            calls_before = len(array.calls())
            child = launch(-1 if during else window)
            wanted = f"flushing {window}" if during else f"flushed {window}"
            if not _wait_for(root / "status", wanted, child, 120):
                child.kill()
                raise SystemExit(f"bench_cleanup rework: the child never reached window {window}")
            if during:
                time.sleep(rng.uniform(0.0, 0.15))
            child.send_signal(signal.SIGKILL)
            kill_times.append((round(time.monotonic(), 3), "during" if during else "after"))
            child.wait()
            time.sleep(_HANG_SECONDS + 0.3)  # calls the fake still holds end (and apply)
            answered = {
                c.user_id
                for c in array.calls()[calls_before:]
                if c.status in (200, 404) and c.fault is None and c.user_id is not None
            }
            bound += sum(1 for account in answered if not notes.read(by_account[account]).final)
        child = launch(-1)
        if child.wait(timeout=180) != 0 or (root / "status").read_text(encoding="utf-8") != "done":
            raise SystemExit("bench_cleanup rework: the last run did not finish")
        calls = array.calls()
        left = len(array.users())
    repeated = 0
    details: list[list[tuple[float, int, str | None]]] = []  # each repeated account's calls, for a reader
    for account in by_account:
        # In the order Array received them: a held (timeout) request is recorded when it ends.
        mine = sorted((c for c in calls if c.user_id == account), key=lambda c: c.received_at)
        seen = next((i for i, c in enumerate(mine) if c.status in (200, 404) and c.fault is None), None)
        # A repeated call is counted once, by the answer that ended it: the requests Array failed
        # (5xx, held) before it are the client's own retries within that call.
        again = 0 if seen is None else sum(1 for c in mine[seen + 1 :] if c.fault is None)
        if again:
            repeated += again
            details.append([(round(c.received_at, 3), c.status, c.fault) for c in mine])
    (root / "repeats.json").write_text(json.dumps({"kills": kill_times, "calls": details}), encoding="utf-8")
    finals: dict[str, set[str]] = {}
    for line in (root / "lake.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["kind"] in _FINAL_KINDS:
            finals.setdefault(row["account"], set()).add(row["kind"])
    return ReworkCounts(
        accounts=len(by_account),
        delete_calls=len(calls),
        repeated=repeated,
        in_flight_at_kills=bound,
        two_finals=sum(1 for kinds in finals.values() if len(kinds) > 1),
        left_at_array=left + sum(1 for account in by_account if account not in finals),
        kills=REWORK_KILLS,
    )


def rework_figure(counts: ReworkCounts) -> Comparison:
    return Comparison(
        name=f"rework: repeated DELETEs over {counts.kills} kills ({counts.accounts} accounts, "
        f"{counts.delete_calls} DELETE calls, {counts.two_finals} with two final outcomes)",
        value=counts.repeated,
        unit="calls",
        baseline_name="calls in flight at the kills",
        baseline_value=counts.in_flight_at_kills,
        better="lower",
        target="repeated <= in flight, 0 accounts with two final outcomes, none left",
        met=counts.repeated <= counts.in_flight_at_kills
        and counts.two_finals == 0
        and counts.left_at_array == 0,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["rework-child"]:
        rework_child(sys.argv[2])
    else:
        main()

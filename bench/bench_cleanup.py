"""`make bench` / `python -m bench cleanup`: Array account cleanups per second.

The figure: `CleanupHandler.flush()` on a batch of expiries (the production path: the in-use guard's GSI1
query, the delete at Array, the conditional mark of the row Removed, one outcome each), the batch's cleanups
run `ArraySettings.concurrency` (8) at a time, against the fake Array answering every call after a fixed
20 ms and moto (in its own process) for the table and the retry queue. Baseline, in the same run: the same
handler on the same kind of batch with concurrency 1, so the same calls made one at a time.

A second pair isolates Array: the HTTP client's deletes alone, 8 at a time beside one at a time.

Each figure is the best of three batches (a fresh table, accounts and rows each time: a cleanup deletes
them, and moto's GSI query reads the whole table). Every run is checked: every account deleted, the rows
Removed, nothing parked.
"""

from __future__ import annotations

__all__ = ["main"]

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from botocore.config import Config

from adapters import HttpArrayClient
from bench._moto import moto_client, moto_server
from bench._report import Figure, print_figures
from config import ArraySettings
from devstack.fake_array import FakeArrayServer
from pipeline.clock import SystemClock
from pipeline.events import ChangeKind, CleanupExpired, StreamPosition
from pipeline.tables import create_table
from processors.cleanup import CleanupHandler, ensure_retry_queues
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


def _expiry(user: str, account: str) -> CleanupExpired:
    key = stale_key(user, account)
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

    latency_ms = f"{LATENCY_SECONDS * 1000:.0f} ms"
    print_figures(
        f"Array account cleanup: {BATCH} expiries per flush, fake Array at {latency_ms} per call, "
        f"moto in its own process (best of {REPEATS})",
        [
            Figure(
                name=f"CleanupHandler.flush, {CONCURRENCY} at a time (guard + delete + mark)",
                value=concurrent,
                unit="cleanups/s",
                baseline_name="the same handler, one at a time",
                baseline_value=one_at_a_time,
            ),
            Figure(
                name=f"HttpArrayClient.delete_user alone, {CONCURRENCY} at a time",
                value=bare_concurrent,
                unit="deletes/s",
                baseline_name="one at a time",
                baseline_value=bare_one_at_a_time,
            ),
        ],
    )
    print(
        f"  (one call at a time cannot beat {1 / LATENCY_SECONDS:,.0f}/s at {latency_ms}; "
        f"{CONCURRENCY} at a time, {CONCURRENCY / LATENCY_SECONDS:,.0f}/s)"
    )


if __name__ == "__main__":
    main()

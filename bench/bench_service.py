"""`make bench` / `python -m bench service`: the entitlements service's routes and the relinker.

Routes. Each route's throughput and latency (p50, p99) at a fixed concurrency (8 clients), through
`entitlements serve` (its own process, uvicorn) on the local stack: moto in its own process for the
table, the fake Array and the fake transactions-service on loopback at 0 ms. Baseline, in the same run:
a bare loop making the same table calls (the same requests, built by `schema.table_writes`) and the same fake
HTTP calls, with the same concurrency, no service in between. Each user goes through signup, processor,
array-signup, cancellation and reactivation in that order (one route at a time over every user), both
in the service and in the bare loops (their own users); two cohorts a side, their runs alternating,
each side's best kept. Two frozen bare loops: the writes the service made before the user's guard
(signup's unconditional put, unguarded transactions) and the writes it makes now (the guard in every
transaction, signup's conditional put inside one). Each route prints both ratios and the milliseconds a
request the service adds over the new writes' loop. Target: service >= 0.7x the new writes' loop.
Measured with the guard (2026-12-01, `python -m bench service`, two runs of the same code, load average
13 to 21 on 2 cores, so every figure is a saturated machine's), req/s: service / new-writes loop / old-
writes loop, the ratio to the new writes (target) and to the old, and the milliseconds a request the
service adds over the new writes' loop. Run 1: signup 27.9 / 31.6 / 89 (0.88x, 0.31x, +33 ms); processor
36.6 / 46.7 / 43 (0.78x, 0.86x, +47 ms); array-signup 15.9 / 25.0 / 30 (0.64x, missed; 0.52x, +184 ms);
cancellation 12.3 / 16.8 / 20 (0.74x, 0.60x, +171 ms); reactivation 27.7 / 30.3 / 40 (0.91x, 0.69x, +25
ms). Run 2: signup 18.9 / 39.2 / 67 (0.48x, missed; 0.28x, +218 ms); processor 47.7 / 70.1 / 63 (0.68x,
missed; 0.76x, +54 ms); array-signup 26.9 / 27.0 / 41 (1.00x, 0.66x, +0.5 ms); cancellation 20.6 / 32.3 /
39 (0.64x, missed; 0.53x, +140 ms); reactivation 15.0 / 31.0 / 34 (0.48x, missed; 0.44x, +277 ms).
Between the runs each route's ratio moved by up to 0.4: at this load the target is not shown met or
missed, only the order of the cost. The old-to-new drop is mostly moto's: signup's put became a
TransactWriteItems, and moto deep-copies the table for each item of every transaction (to roll back: moto
5.2.5, read in its source), so a transaction costs more as the table grows; DynamoDB charges a
transaction twice a plain write's capacity, and no copy. The processor route is not guarded
(docs/table.md), so its two loops differ only by noise.

The service's extra cost is CPU in its own process (~4 ms a signup against the bare loop's ~3 ms of
client calls, measured per process, before the guard): its HTTP server (uvicorn with httptools: h11's
pure-Python parser cost ~1 ms more), FastAPI's middleware and routing (the metrics middleware ~9% of it),
the thread hop, the outcome recording. The cheapest route (signup) sits nearest the target, and on a
saturated machine it dips under it (0.63-0.75x at load 10-18), where the other routes stay above.

Relinks. The relinker worker (`service.relinker`) draining relink jobs from SQS (moto), each link's two
downstream calls (transactions-service, Array) held 50 ms by the fakes, at concurrency 16, beside the same
worker at concurrency 1. The time runs from the worker's start to the last job's outcome; each side is the
best of two rounds, the rounds alternating (1, 16, 1, 16), each on a table and a queue of its own.
Target: >= 8x.

Every run is checked: every request answered as expected, every job linked.

Where a relink's time went (py-spy on each process, per-call timers, CPU seconds per process; figures
from one loaded 2-core machine):

- one at a time a link takes ~116 ms: two 52 ms fake calls and two ~5 ms table calls: the ideal at 16 is
  ~16x. At 16 the fake calls stayed at ~53 ms (the fakes' threaded server is not a bound) and the
  boto3 pool (64) and httpx pool (32) were never short (every call opens a new connection anyway:
  werkzeug, which serves both moto and the fakes, closes each connection after one response);
- the bound was moto, one process serving DynamoDB one call at a time (`devstack.moto_server`'s lock)
  and SQS beside it. Its SQS receive checked every message it returned against the retention period
  through `get_queue_attributes`, which counts the whole queue each time: a receive of ten from the
  192-job queue took ~250 ms (p50) instead of ~10, starving the workers and holding moto's GIL while
  the DynamoDB calls queued (Query 105 ms p50, PutItem 84 ms): 3.6x to 4.9x. And moto's Query sorted
  every item of the table to pick one partition: most of its DynamoDB time. Both are local-stack
  patches now (`devstack._moto_patches.install_sqs_receive_cost`, `install_query_cost`): moto's CPU per
  link fell from 9.8 ms to 5.9 ms, receives to ~20 ms, and the figure to ~10x (83-95 relinks/s) when
  the machine is not saturated;
- what remains is CPU: per link ~6 ms in moto (serialised: its ceiling measured alone, Query + PutItem
  pairs from 16 threads, is ~130-150 pairs/s), ~5 ms in this process (boto3, httpx, the worker) and
  ~2 ms in the fakes. With other work on the two cores the 16-way side loses most (at load ~11 the
  same code measured 4.4x); the one-at-a-time side barely waits for CPU. The outcome writes (a lake
  flush every 0.5 s, on the acknowledger thread, 10-30 ms) are off the links' path.
"""

from __future__ import annotations

__all__ = ["main"]

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import httpx
from botocore.config import Config
from pydantic import SecretStr

from bench._moto import moto_client
from bench._report import BenchThreads, Comparison, print_figures
from config import (
    ArraySettings,
    AwsSettings,
    ConsumerSettings,
    LakeSettings,
    ServiceSettings,
    Settings,
    settings_environment,
)
from devstack.fake_array import PROCESSOR_TOKEN
from entitlements import compose
from pipeline import create_table
from processors.cleanup import ensure_retry_queues
from schema import array as wire
from schema import table_writes
from schema.table import GUARD_SK
from service import Relinker, enqueue_relinks

CONCURRENCY = 8
USERS = 200
ROUTE_ROUNDS = 2
RELINK_CONCURRENCY = 16
RELINK_LATENCY_SECONDS = 0.050
RELINK_JOBS = {RELINK_CONCURRENCY: 256, 1: 24}
RELINK_ROUNDS = 2
RELINK_TIMEOUT_SECONDS = 300.0  # a round that takes longer is stuck, not slow
ROUTES = ("signup", "processor", "array-signup", "cancellation", "reactivation")
_SIDES = ("svc", "new", "old")  # the service; bare loops of its writes now and of its writes before the guard
_EXPECTED = {"signup": 201, "processor": 200, "array-signup": 201, "cancellation": 200, "reactivation": 200}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class _Run:
    """One route over every user at a fixed concurrency: throughput and per-request latencies."""

    def __init__(self, call: Callable[[str], None], users: list[str], concurrency: int) -> None:
        self.latencies: list[float] = []
        lock = threading.Lock()

        def timed(user: str) -> None:
            started = time.perf_counter()
            call(user)
            elapsed = time.perf_counter() - started
            with lock:
                self.latencies.append(elapsed)

        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(timed, users))
        self.seconds = time.perf_counter() - started
        self.rate = len(users) / self.seconds

    def ms(self, fraction: float) -> float:
        return _percentile(self.latencies, fraction) * 1000


# -- the bare loop: the same downstream calls, no service --------------------------------------------


class _Bare:
    """The service's downstream calls for each route, made directly (boto3 + httpx), nothing else.

    Two frozen loops: `guarded=False` makes the writes the service made before the user's guard (a
    signup's unconditional put, transactions without the guard: the shapes `schema.table_writes` still
    builds with no `guard_version`, the local stack's direct writes); `guarded=True` the service's writes
    now (the guard version read in the same query, the guard in every transaction, signup's conditional
    put inside one)."""

    def __init__(
        self,
        dynamodb: Any,
        table: str,
        http: httpx.Client,
        array_url: str,
        transactions_url: str,
        *,
        guarded: bool,
    ) -> None:
        self.dynamodb = dynamodb
        self.table = table
        self.http = http
        self.array_url = array_url
        self.transactions_url = transactions_url
        self.guarded = guarded
        self.accounts: dict[str, str] = {}
        self.headers = {wire.SERVER_TOKEN_HEADER: "local-server-token"}

    def _items(self, user: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.dynamodb.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"USER#{user}"}},
            ConsistentRead=True,
        )["Items"]
        return items

    def _guard(self, user: str) -> int | None:
        """The query the service makes, and (guarded) the guard version it reads from it."""
        items = self._items(user)
        if not self.guarded:
            return None
        return next((int(i["version"]["N"]) for i in items if i["sk"]["S"] == GUARD_SK), 0)

    def _create(self, user: str) -> str:
        body = wire.create_user_body("local-app-key", user)
        answer = self.http.post(self.array_url + wire.CREATE_USER_PATH, json=body, headers=self.headers)
        answer.raise_for_status()
        return str(answer.json()[wire.USER_ID_FIELD])

    def signup(self, user: str) -> None:
        version = self._guard(user)
        account = self._create(user)
        now = datetime.now(UTC)
        row = table_writes.entitlement_row(user, account, now=now)
        if version is None:
            self.dynamodb.put_item(TableName=self.table, Item=row)
        else:
            items = table_writes.signup_transaction(self.table, user, row, guard_version=version, now=now)
            self.dynamodb.transact_write_items(TransactItems=items)
        self.accounts[user] = account

    def processor(self, user: str) -> None:
        image = next(i for i in self._items(user) if i["sk"]["S"].startswith("ENTITLEMENT#"))
        primary = self.http.get(self.transactions_url + wire.primary_account_path(user))
        primary.raise_for_status()
        token = primary.json()[wire.PROCESSOR_TOKEN_FIELD]
        body = wire.processor_token_body("local-app-key", self.accounts[user], token)
        self.http.post(
            self.array_url + wire.PROCESSOR_TOKEN_PATH, json=body, headers=self.headers
        ).raise_for_status()
        self.dynamodb.put_item(**table_writes.save_if_active_request(self.table, image))

    def array_signup(self, user: str) -> None:
        version = self._guard(user)
        new = self._create(user)
        now = datetime.now(UTC)
        old = self.accounts[user]
        items = table_writes.second_signup_transaction(
            self.table,
            user,
            old_array_account_id=old,
            new_row=table_writes.entitlement_row(user, new, now=now),
            stale_ttl=table_writes.ttl_after(now, 1),
            now=now,
            guard_version=version,
        )
        self.dynamodb.transact_write_items(TransactItems=items)
        self.accounts[user] = new

    def cancellation(self, user: str) -> None:
        version = self._guard(user)
        now = datetime.now(UTC)
        ttl = table_writes.ttl_after(now, 63)
        items = table_writes.cancellation_transaction(
            self.table, user, self.accounts[user], ttl=ttl, now=now, guard_version=version
        )
        self.dynamodb.transact_write_items(TransactItems=items)

    def reactivation(self, user: str) -> None:
        version = self._guard(user)
        items = table_writes.reactivation_transaction(
            self.table, user, self.accounts[user], now=datetime.now(UTC), guard_version=version
        )
        self.dynamodb.transact_write_items(TransactItems=items)

    def route(self, name: str) -> Callable[[str], None]:
        call: Callable[[str], None] = getattr(self, name.replace("-", "_"))
        return call


# -- the fakes and the service, each in its own process ------------------------------------------------

_MOTO = """
import sys
from devstack.moto_server import MotoServer
server = MotoServer()
server.start()
print(server.endpoint, flush=True)
sys.stdin.read()
"""
_FAKES = """
import sys
from devstack.fake_array import FakeArrayServer
from devstack.fake_transactions import FakeTransactionsServer
array = FakeArrayServer(host="127.0.0.1", port=0, every_account_exists=True).start()
transactions = FakeTransactionsServer(host="127.0.0.1", port=0).start()
print(array.url, transactions.url, flush=True)
sys.stdin.read()
"""


class _Process:
    """A script in a process of its own (the bench's own process runs the clients and the relinker):
    it prints its URLs on one line and serves until its stdin closes."""

    def __init__(self, script: str) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._process.stdout is not None
        self.urls = self._process.stdout.readline().split()
        if not self.urls:
            self.__exit__()
            raise SystemExit("bench_service: a helper process did not start")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)


class _FakesProcess(_Process):
    """The fake Array and the fake transactions-service, driven over their admin paths."""

    def __init__(self) -> None:
        super().__init__(_FAKES)
        self.array_url, self.transactions_url = self.urls

    def latency(self, seconds: float) -> None:
        """Every processor-token and primary-account call held `seconds`."""
        plan = {"latency_seconds": seconds}
        httpx.post(
            f"{self.array_url}/__admin/faults", json={"call": PROCESSOR_TOKEN, **plan}
        ).raise_for_status()
        httpx.post(f"{self.transactions_url}/__admin/faults", json=plan).raise_for_status()


# -- the service in its own process --------------------------------------------------------------------


def _settings(endpoint: str, table: str, array: str, transactions: str, *, root: Path, port: int) -> Settings:
    return Settings(
        aws=AwsSettings(
            endpoint_url=endpoint, access_key_id=SecretStr("bench"), secret_access_key=SecretStr("bench")
        ),
        consumer=ConsumerSettings(table_name=table, state_dir=root / "state"),
        lake=LakeSettings(root=str(root / "lake")),
        array=ArraySettings(base_url=array),
        service=ServiceSettings(port=port, transactions_base_url=transactions, relinker_concurrency=16),
    )


class _ServeProcess:
    def __init__(self, settings: Settings) -> None:
        command = shutil.which("entitlements", path=str(Path(sys.executable).parent)) or "entitlements"
        env = {**os.environ, **settings_environment(settings), "AWS_EC2_METADATA_DISABLED": "true"}
        self.url = f"http://127.0.0.1:{settings.service.port}"
        self._process = subprocess.Popen(
            [command, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(600):
            try:
                if httpx.get(self.url + "/stats", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        self.stop()
        raise SystemExit("bench_service: the service did not start")

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)


def _routes(endpoint: str, root: Path, fakes: _FakesProcess) -> list[Comparison]:
    config = Config(retries={"mode": "standard", "max_attempts": 2}, max_pool_connections=32)
    dynamodb = moto_client(endpoint, "dynamodb", config)
    table = create_table(dynamodb, f"service-bench-{uuid.uuid4().hex[:6]}").table_name
    settings = _settings(
        endpoint, table, fakes.array_url, fakes.transactions_url, root=root, port=_free_port()
    )
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
    service = _ServeProcess(settings)
    figures: list[Comparison] = []
    try:
        with httpx.Client(limits=limits, timeout=30) as http:
            loops = {
                guarded: _Bare(
                    dynamodb, table, http, fakes.array_url, fakes.transactions_url, guarded=guarded
                )
                for guarded in (True, False)
            }
            # ROUTE_ROUNDS cohorts a side, each going through every route; per route the cohorts'
            # runs alternate (service, new writes, old writes, ...) and each side keeps its best.
            cohorts = [
                {side: [f"{side}-{uuid.uuid4().hex[:10]}" for _ in range(USERS)] for side in _SIDES}
                for _ in range(ROUTE_ROUNDS)
            ]
            for route in ROUTES:

                def through_service(user: str, route: str = route) -> None:
                    answer = http.post(f"{service.url}/{user}/{route}")
                    if answer.status_code != _EXPECTED[route]:
                        raise SystemExit(
                            f"bench_service: {route} answered {answer.status_code} {answer.text}"
                        )

                calls = {
                    "svc": through_service,
                    "new": loops[True].route(route),
                    "old": loops[False].route(route),
                }
                runs = [
                    {side: _Run(calls[side], users[side], CONCURRENCY) for side in _SIDES}
                    for users in cohorts
                ]
                best = {side: max((run[side] for run in runs), key=lambda r: r.rate) for side in _SIDES}
                served, new, old = best["svc"], best["new"], best["old"]
                # The added time a request, at this concurrency: the service's mean time per request
                # beyond the new writes' loop (CONCURRENCY requests in flight at once).
                added_ms = (1 / served.rate - 1 / new.rate) * CONCURRENCY * 1000
                figures.append(
                    Comparison(
                        name=f"{route}: service {served.rate:,.0f} req/s (p50 {served.ms(0.5):.1f} ms, "
                        f"p99 {served.ms(0.99):.1f} ms); new-writes loop p50 {new.ms(0.5):.1f} ms; "
                        f"old-writes loop {old.rate:,.0f} req/s (p50 {old.ms(0.5):.1f} ms), service "
                        f"{served.rate / old.rate:.2f}x of it; +{added_ms:.1f} ms a request over new writes",
                        value=served.rate,
                        unit="req/s",
                        baseline_name="bare loop of the new (guarded) writes",
                        baseline_value=new.rate,
                        target="ratio >= 0.7",
                        met=served.rate >= 0.7 * new.rate,
                    )
                )
    finally:
        service.stop()
    return figures


# -- relinks -------------------------------------------------------------------------------------------


def _relink_round(endpoint: str, root: Path, fakes: _FakesProcess, concurrency: int, jobs: int) -> float:
    """One relinker run on a table of its own: `jobs` signed-up users' relinks drained at
    `concurrency`, timed from the worker's start to the last job's outcome. Returns relinks a second."""
    config = Config(retries={"mode": "standard", "max_attempts": 2}, max_pool_connections=64)
    dynamodb = moto_client(endpoint, "dynamodb", config)
    sqs = moto_client(endpoint, "sqs", config)
    table = create_table(dynamodb, f"relink-bench-{uuid.uuid4().hex[:6]}").table_name
    settings = _settings(endpoint, table, fakes.array_url, fakes.transactions_url, root=root, port=0)
    parts = compose.service_parts(settings)
    try:
        fakes.latency(0.0)
        users = [f"relink-{uuid.uuid4().hex[:10]}" for _ in range(jobs)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(parts.service.signup, users))
        fakes.latency(RELINK_LATENCY_SECONDS)
        queue_url = ensure_retry_queues(sqs, f"relink-bench-{uuid.uuid4().hex[:6]}").queue_url
        enqueue_relinks(sqs, queue_url, users)
        worker = Relinker(
            sqs=sqs,
            queue_url=queue_url,
            arraylink=parts.arraylink,
            recorder=parts.recorder,
            concurrency=concurrency,
            wait_seconds=1,
        )
        stop = threading.Event()
        threads = BenchThreads()
        started = time.perf_counter()
        runner = threads.start("relinker", worker.run_forever, stop)
        deadline = time.monotonic() + RELINK_TIMEOUT_SECONDS
        while worker.report.linked + worker.report.failed + worker.report.not_active < jobs:
            if not runner.is_alive():  # it raised (or returned): no more outcomes will come
                break
            if time.monotonic() > deadline:
                stop.set()
                raise SystemExit(f"bench_service: the relinks did not end in {RELINK_TIMEOUT_SECONDS:g} s")
            time.sleep(0.005)
        seconds = time.perf_counter() - started
        stop.set()
        threads.join(runner, timeout=60)
        threads.check()
        if worker.report.linked != jobs:
            raise SystemExit("bench_service: a relink did not link")
        return jobs / seconds
    finally:
        parts.recorder.flush()
        if parts.close is not None:
            parts.close()


def _relinks(endpoint: str, root: Path, fakes: _FakesProcess) -> Comparison:
    """Each concurrency's best of RELINK_ROUNDS rounds, the rounds alternating (1, 16, 1, 16): a burst
    of load from the rest of the machine then costs one round, not one side of the ratio."""
    rates: dict[int, float] = dict.fromkeys(RELINK_JOBS, 0.0)
    for _ in range(RELINK_ROUNDS):
        for concurrency in sorted(RELINK_JOBS):
            rate = _relink_round(endpoint, root, fakes, concurrency, RELINK_JOBS[concurrency])
            rates[concurrency] = max(rates[concurrency], rate)
    return Comparison(
        name=f"relinks at concurrency {RELINK_CONCURRENCY} ({RELINK_JOBS[RELINK_CONCURRENCY]} jobs, "
        f"best of {RELINK_ROUNDS})",
        value=rates[RELINK_CONCURRENCY],
        unit="relinks/s",
        baseline_name=f"one at a time ({RELINK_JOBS[1]} jobs, best of {RELINK_ROUNDS})",
        baseline_value=rates[1],
        target="ratio >= 8",
        met=rates[RELINK_CONCURRENCY] >= 8 * rates[1],
    )


def main() -> None:
    with (
        tempfile.TemporaryDirectory(prefix="bench-service-") as folder,
        _Process(_MOTO) as moto,
        _FakesProcess() as fakes,
    ):
        root, endpoint = Path(folder), moto.urls[0]
        routes = _routes(endpoint, root, fakes)
        relinks = _relinks(endpoint, root, fakes)
    print_figures(
        f"Service routes: {USERS} users per route (best of {ROUTE_ROUNDS}), {CONCURRENCY} clients, "
        "through `entitlements serve` "
        "(uvicorn, own process) on the project's moto (own process), fakes at 0 ms (own process)",
        routes,
    )
    print_figures(
        f"Relinker: {RELINK_LATENCY_SECONDS * 1000:.0f} ms per downstream call "
        "(transactions-service, Array), SQS jobs on moto",
        [relinks],
    )


if __name__ == "__main__":
    main()

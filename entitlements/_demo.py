"""`make demo`: the whole product on the embedded local stack, ending in a report.

1. moto on 127.0.0.1 with the table, the TTL emulator, the fake Array (every account it is asked to
   delete exists once) and the fake transactions-service, all on one simulated clock where 63 days pass
   in seconds;
2. the cleanup's retry queue (the setup command's work), then the real KCL consumer (Java launcher +
   Python children, built by `entitlements.compose`) with the cleanup processor and the lake;
3. the entitlements service in this process on 127.0.0.1 (`entitlements._workload.local_service`), and
   a seeded schedule through it:
   - forced races, each forced through the fakes' hooks (never left to thread timing): a relink is held
     inside Array's processor-token call until a second Array signup (or a cancellation) of the same
     user has answered, then let go; SaveIfActive refuses its write (404, an outcome);
   - one "same account again" second signup (Array answers the account the user holds: nothing written);
   - the workload: the mix as HTTP requests from concurrent clients (`devstack.service_workload`);
   - with faults, the seed's harm: the same forced race through a second in-process service whose link
     write is devstack's fault-injection wrapper (an unconditional put): the retired row comes back
     Active beside the new one, with a stale record naming its account; and the anomalies the service
     cannot produce, planted by direct table writes (string and millisecond ttls, a failed
     reactivation delete, a canary processor token);
4. wait until every cleanup record that can expire has expired and the consumer has caught up with the
   stream; drain parked cleanups (while the consumer runs, so it lands the rows they mark Removed) and
   wait for the stream's end again; stop the consumer gracefully;
5. snapshot the lake, summarise the events by kind and the cleanup outcomes, and run the audits.
"""

from __future__ import annotations

__all__ = ["DemoOptions", "DemoResult", "run_demo"]

import functools
import json
import random
import shutil
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from analytics import lake_from_settings, snapshot
from analytics.audits import AuditReport, load_config, render_report, run_audits
from analytics.views import connect
from config import Settings, load_settings
from devstack._fake_http import Hooks
from devstack.fake_array import PROCESSOR_TOKEN, FakeArrayServer
from devstack.fake_transactions import FakeTransactionsServer
from devstack.service_workload import WorkloadConfig, WorkloadSummary, run_service_workload
from devstack.simulator import EntitlementTable, FaultKind, PlantedFault, SimulationConfig, plant_faults
from devstack.stack import LocalStack
from entitlements import compose
from entitlements._clients import aws_client
from entitlements._workload import local_service
from pipeline.clock import SimulatedClock
from pipeline.daemon import DaemonSpec, KclDaemon

_LOCAL = "testing"


@dataclass(frozen=True)
class DemoOptions:
    state_dir: Path = Path("var/demo")
    users: int = 200
    operations: int = 1500
    rate: float = 300.0
    faults: bool = True
    seed: int = 7
    clients: int = 8
    races: int = 3  # forced races of each kind (relink vs second signup, relink vs cancellation)
    # Simulated seconds per real second: 63 days in about 15 real seconds.
    speed: float = 63 * 86_400 / 15
    timeout_seconds: float = 600.0


# The anomalies the service cannot produce: planted by direct table writes, labelled so.
DIRECT_WRITE_FAULTS = (
    FaultKind.FAILED_REACTIVATION_DELETE,
    FaultKind.STRING_TTL,
    FaultKind.MILLISECOND_TTL,
    FaultKind.TOKEN_CANARY,
)


@dataclass
class ForcedRaces:
    """What the seeded schedule's forced races came to (counts only)."""

    relink_vs_second_signup: dict[str, int] = field(default_factory=dict)  # link status -> count
    relink_vs_cancellation: dict[str, int] = field(default_factory=dict)
    same_account_again: dict[str, int] = field(default_factory=dict)  # second signup status -> count
    unguarded_stale_put: dict[str, int] = field(default_factory=dict)
    overwritten_rows: int = 0  # what the unguarded wrapper counted (the seed's harm, made)


@dataclass(frozen=True)
class DemoResult:
    workload: WorkloadSummary
    races: ForcedRaces
    planted: list[PlantedFault]
    events_by_type: dict[str, int]
    outcomes_by_kind: dict[str, int]
    consumer_stats: dict[str, Any]
    audit: AuditReport
    report_paths: dict[str, Path]


def _settings(
    options: DemoOptions,
    endpoint: str,
    stream_arn: str,
    urls: tuple[str, str],
    clock: dict[str, str | float],
) -> Settings:
    array_url, transactions_url = urls
    state = options.state_dir.resolve()
    return load_settings(
        aws={
            "endpoint_url": endpoint,
            "region": "eu-west-1",
            "access_key_id": _LOCAL,
            "secret_access_key": _LOCAL,
        },
        consumer={
            "table_name": "entitlements",
            "stream_arn": stream_arn,
            "application_name": "entitlements-demo",
            "state_dir": state,
            "idle_time_between_reads_ms": 250,
            "failover_time_ms": 5000,
            "lease_assignment_interval_ms": 1000,
            "shard_sync_interval_ms": 2000,
            "commit_every_records": 2000,
            "commit_interval_seconds": 1.0,
            "launcher_jar": Path("pipeline/launcher/target/entitlements-kcl-launcher.jar").resolve(),
        },
        lake={"root": str(state / "lake"), "flush_seconds": 5.0},
        array={"base_url": array_url, "retry_budget_seconds": 10.0},
        service={"transactions_base_url": transactions_url, "outcome_flush_seconds": 1.0},
        clock=clock,
    )


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(1.0)
    raise TimeoutError(f"demo timed out waiting for {what}")


def _pending_expiries(client: Any, table: str, now_epoch: float) -> int:
    """Cleanup records DynamoDB's TTL would still remove: a Number ttl (seconds) not yet deleted."""
    pending = 0
    for page in client.get_paginator("scan").paginate(
        TableName=table, ProjectionExpression="#t", ExpressionAttributeNames={"#t": "ttl"}
    ):
        for item in page["Items"]:
            ttl = item.get("ttl", {}).get("N")
            if ttl is not None and float(ttl) < now_epoch + 400 * 86_400:
                pending += 1
    return pending


def _last_stream_sequence(settings: Settings, client_factory: Callable[[str], Any]) -> str | None:
    streams = client_factory("dynamodbstreams")
    arn = settings.consumer.stream_arn
    last: str | None = None
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            if not page["Records"]:
                break
            last = page["Records"][-1]["dynamodb"]["SequenceNumber"]
            iterator = page.get("NextShardIterator")
    return last


def _consumed_up_to(settings: Settings, target: str | None) -> bool:
    seen = _consumer_stats(settings.consumer.state_dir)["last_sequence_number"]
    return target is None or (seen is not None and int(seen) >= int(target))


def _wait_for_the_stream_end(settings: Settings, client: Callable[[str], Any], timeout: float) -> None:
    """The consumer's own writes (rows marked Removed) extend the stream: wait until it has read to an
    end that no longer moves."""
    while True:
        target = _last_stream_sequence(settings, client)
        _wait(functools.partial(_consumed_up_to, settings, target), timeout, "the consumer")
        time.sleep(3.0)
        if _last_stream_sequence(settings, client) == target:
            return


def _consumer_stats(state_dir: Path) -> dict[str, Any]:
    merged: dict[str, Any] = {
        "records": 0,
        "quarantined": 0,
        "parked_batches": 0,
        "last_sequence_number": None,
    }
    for path in sorted((state_dir / "stats").glob("*.json")):
        stats = json.loads(path.read_text())
        merged["records"] += stats["records"]
        merged["quarantined"] += stats["quarantined"]
        merged["parked_batches"] += stats["parked_batches"]
        merged["last_sequence_number"] = stats["last_sequence_number"]
        merged["iterator_age_ms"] = stats.get("iterator_age_ms")
    return merged


def _count(into: dict[str, int], status: int) -> None:
    into[str(status)] = into.get(str(status), 0) + 1


def _forced_race(
    http: httpx.Client, array: FakeArrayServer, service_url: str, user: str, racer: str
) -> tuple[int, int]:
    """Sign `user` up, then hold their relink inside Array's processor-token call until `racer` (the
    route of a second signup or a cancellation) has answered; let it go. Returns (racer status, link
    status)."""
    signed = http.post(f"{service_url}/{user}/signup")
    signed.raise_for_status()
    account = signed.json()["arrayAccountId"]
    event = f"race/{user}"
    hold = array.hold(PROCESSOR_TOKEN, key=account, until=event)
    with ThreadPoolExecutor(1) as pool:
        link = pool.submit(http.post, f"{service_url}/{user}/processor")
        try:
            if not hold.wait_arrived(60):
                raise TimeoutError("demo: the held relink never reached Array")
            racer_status = http.post(f"{service_url}/{user}/{racer}").status_code
        finally:
            array.hooks.set(event)
        return racer_status, link.result(timeout=120).status_code


def _schedule_users(seed: int, count: int, namespace: str) -> list[str]:
    rng = random.Random(f"{seed}/races")  # noqa: S311 (a reproducible schedule, not a secret)
    return [f"{namespace}{uuid.UUID(int=rng.getrandbits(128), version=4)}" for _ in range(count)]


def _run_races(
    options: DemoOptions,
    settings: Settings,
    array: FakeArrayServer,
    service_url: str,
    races: ForcedRaces,
    *,
    namespace: str,
) -> None:
    users = iter(_schedule_users(options.seed, 2 * options.races + 2, namespace))
    with httpx.Client(timeout=120) as http:
        for _ in range(options.races):
            _, link = _forced_race(http, array, service_url, next(users), "array-signup")
            _count(races.relink_vs_second_signup, link)
            _, link = _forced_race(http, array, service_url, next(users), "cancellation")
            _count(races.relink_vs_cancellation, link)
        same = next(users)
        http.post(f"{service_url}/{same}/signup").raise_for_status()
        array.reuse_next(same)
        _count(races.same_account_again, http.post(f"{service_url}/{same}/array-signup").status_code)
        if options.faults:
            unguarded_sink = compose.lake_handler(settings, name="demo-unguarded-outcomes")
            with local_service(settings, unguarded_links=True, sink=unguarded_sink) as unguarded:
                _, link = _forced_race(http, array, unguarded.url, next(users), "array-signup")
                _count(races.unguarded_stale_put, link)
                assert unguarded.unguarded is not None
                races.overwritten_rows = unguarded.unguarded.snapshot()["overwritten"]


def _drive_the_service(
    options: DemoOptions,
    settings: Settings,
    *,
    array: FakeArrayServer,
    clock: SimulatedClock,
    dynamodb: Any,
    progress: Callable[[str], None],
) -> tuple[WorkloadSummary, ForcedRaces, list[PlantedFault]]:
    """Step 3: the forced races, the workload through the service, the harm and the planted anomalies."""
    races = ForcedRaces()
    planted: list[PlantedFault] = []
    # moto's state outlives a run in the same process: each run's users carry the run's own prefix.
    namespace = f"{uuid.uuid4().hex[:8]}-"
    with local_service(settings) as service:
        progress(f"entitlements service on {service.url}")
        _run_races(options, settings, array, service.url, races, namespace=namespace)
        progress(
            f"forced races: relink vs second signup {races.relink_vs_second_signup}, relink vs "
            f"cancellation {races.relink_vs_cancellation} (link answers by status)"
        )
        workload = run_service_workload(
            WorkloadConfig(
                users=options.users,
                operations=options.operations,
                clients=options.clients,
                seed=options.seed,
                rate=options.rate,
                namespace=namespace,
            ),
            service.url,
        )
    progress(
        f"workload: {sum(workload.operations.values())} requests from {options.clients} clients, "
        f"{workload.relinks_rejected} relinks refused by SaveIfActive"
    )
    if options.faults:
        config = SimulationConfig(
            table_name="entitlements",
            cleanup_ttl_days=settings.policy.cleanup_ttl_days,
            stale_entitlement_ttl_days=settings.policy.stale_entitlement_ttl_days,
            seed=options.seed,
            faults=True,
        )
        planted = plant_faults(config, EntitlementTable(dynamodb, "entitlements"), clock, DIRECT_WRITE_FAULTS)
        progress(
            f"the seed's harm through the unguarded link write: {races.overwritten_rows} row(s) "
            f"overwritten; planted by direct writes: {len(planted)} anomalies"
        )
    return workload, races, planted


def run_demo(options: DemoOptions, progress: Callable[[str], None]) -> DemoResult:
    if options.state_dir.exists():
        shutil.rmtree(options.state_dir)
    options.state_dir.mkdir(parents=True)
    now = datetime.now(UTC)
    clock = SimulatedClock(now, now, options.speed)
    clock_settings: dict[str, str | float] = {
        "start": now.isoformat(),
        "anchor": now.isoformat(),
        "speed": options.speed,
    }
    hooks = Hooks()
    with (
        LocalStack(
            clock=clock, region="eu-west-1", table_name="entitlements", ttl_interval_seconds=0.5
        ) as endpoints,
        FakeArrayServer(every_account_exists=True, hooks=hooks, seed=options.seed) as array,
        FakeTransactionsServer(hooks=hooks, seed=options.seed) as transactions,
    ):
        assert endpoints.stream_arn is not None
        settings = _settings(
            options,
            endpoints.endpoint_url,
            endpoints.stream_arn,
            (array.url, transactions.url),
            clock_settings,
        )
        progress(
            f"local stack on {endpoints.endpoint_url}, fake Array on {array.url}, "
            f"fake transactions-service on {transactions.url}"
        )

        def client(service: str) -> Any:
            return aws_client(settings.aws, service)

        # What `entitlements cleanup setup` does in a deployment: the children only look the queue up.
        compose.setup_retry_queues(settings)
        daemon = KclDaemon(
            DaemonSpec.from_settings(
                settings,
                stream_arn=endpoints.stream_arn,
                worker_id="demo-worker",
                work_dir=settings.consumer.state_dir / "daemon",
            )
        )
        daemon.start()
        progress("KCL consumer started (Java launcher + Python record processors)")
        try:
            dynamodb = client("dynamodb")
            workload, races, planted = _drive_the_service(
                options, settings, array=array, clock=clock, dynamodb=dynamodb, progress=progress
            )
            _wait(
                lambda: _pending_expiries(dynamodb, "entitlements", clock.now().timestamp()) == 0,
                options.timeout_seconds,
                "every cleanup record to expire",
            )
            progress("every cleanup record that can expire has expired")
            # The consumer's own writes (rows marked Removed) extend the stream: wait until it has read
            # to an end that no longer moves.
            _wait_for_the_stream_end(settings, client, options.timeout_seconds)
            progress("the consumer reached the end of the stream")
            # Parked cleanups are drained while the consumer still runs: the retry worker's own writes
            # (rows marked Removed) reach the stream, and the consumer lands them in the lake.
            lake = lake_from_settings(settings)
            landing = compose.lake_handler(settings, name="retry-worker-lake")
            drained = compose.retry_worker(settings, landing).drain(max_seconds=60)
            landing.flush()
            progress(f"retry worker drained parked cleanups ({drained})")
            _wait_for_the_stream_end(settings, client, options.timeout_seconds)
        finally:
            daemon.stop(timeout=90)
        progress("consumer stopped gracefully")
        snapshot(lake)
        with connect(lake) as con:
            events = dict(
                con.execute("SELECT event_type, count(*) FROM changes GROUP BY 1 ORDER BY 1").fetchall()
            )
            outcomes = dict(
                con.execute("SELECT kind, count(*) FROM outcomes GROUP BY 1 ORDER BY 1").fetchall()
            )
        audit = run_audits(lake, load_config(policy=settings.policy))
        reports = {}
        for fmt, name in (("markdown", "audit.md"), ("html", "audit.html"), ("json", "audit.json")):
            path = options.state_dir / name
            path.write_text(render_report(audit, fmt))
            reports[fmt] = path
        return DemoResult(
            workload,
            races,
            planted,
            events,
            outcomes,
            _consumer_stats(settings.consumer.state_dir),
            audit,
            reports,
        )

"""`make demo`: the whole product on the embedded local stack, ending in a report.

1. moto on 127.0.0.1 with the table, the TTL emulator and the fake Array (every account it is asked to
   delete exists once), all on one simulated clock where 63 days pass in seconds;
2. the cleanup's retry queue (the setup command's work), then the real KCL consumer (Java launcher +
   Python children, built by `entitlements.compose`) with the cleanup processor and the lake;
3. the workload simulator (optionally with planted faults);
4. wait until every cleanup record that can expire has expired and the consumer has caught up with the
   stream; stop the consumer gracefully; drain parked cleanups;
5. snapshot the lake, summarise the events by kind and the cleanup outcomes, and run the audits.
"""

from __future__ import annotations

__all__ = ["DemoOptions", "DemoResult", "run_demo"]

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analytics import LakeHandler, lake_from_settings, snapshot
from analytics.audits import AuditReport, load_config, render_report, run_audits
from analytics.views import connect
from config import Settings, load_settings
from devstack.fake_array import FakeArrayServer
from devstack.simulator import EntitlementTable, SimulationConfig, SimulationSummary, run_simulation
from devstack.stack import LocalStack
from entitlements import compose
from entitlements._clients import aws_client
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
    # Simulated seconds per real second: 63 days in about 15 real seconds.
    speed: float = 63 * 86_400 / 15
    timeout_seconds: float = 600.0


@dataclass(frozen=True)
class DemoResult:
    simulation: SimulationSummary
    events_by_type: dict[str, int]
    outcomes_by_kind: dict[str, int]
    consumer_stats: dict[str, Any]
    audit: AuditReport
    report_paths: dict[str, Path]


def _settings(
    options: DemoOptions, endpoint: str, stream_arn: str, array_url: str, clock: dict[str, str | float]
) -> Settings:
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
    with (
        LocalStack(
            clock=clock, region="eu-west-1", table_name="entitlements", ttl_interval_seconds=0.5
        ) as endpoints,
        FakeArrayServer(every_account_exists=True) as array,
    ):
        assert endpoints.stream_arn is not None
        settings = _settings(options, endpoints.endpoint_url, endpoints.stream_arn, array.url, clock_settings)
        progress(f"local stack on {endpoints.endpoint_url}, fake Array on {array.url}")

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
            config = SimulationConfig(
                table_name="entitlements",
                cleanup_ttl_days=settings.policy.cleanup_ttl_days,
                stale_entitlement_ttl_days=settings.policy.stale_entitlement_ttl_days,
                users=options.users,
                operations=options.operations,
                rate=options.rate,
                seed=options.seed,
                faults=options.faults,
            )
            simulation = run_simulation(config, EntitlementTable(dynamodb, "entitlements"), clock)
            progress(
                f"simulated {sum(simulation.operations.values())} operations, {simulation.writes} writes, "
                f"planted {len(simulation.planted_faults)} faults"
            )
            _wait(
                lambda: _pending_expiries(dynamodb, "entitlements", clock.now().timestamp()) == 0,
                options.timeout_seconds,
                "every cleanup record to expire",
            )
            progress("every cleanup record that can expire has expired")
            # The consumer's own writes (rows marked Removed) extend the stream: wait until it has read
            # to an end that no longer moves.
            while True:
                target = _last_stream_sequence(settings, client)
                _wait(
                    lambda end=target: _consumed_up_to(settings, end),  # type: ignore[misc]
                    options.timeout_seconds,
                    "the consumer",
                )
                time.sleep(3.0)
                if _last_stream_sequence(settings, client) == target:
                    break
            progress("the consumer reached the end of the stream")
        finally:
            daemon.stop(timeout=90)
        progress("consumer stopped gracefully")
        lake = lake_from_settings(settings)
        landing = LakeHandler(lake, settings.lake, name="retry-worker-lake")
        drained = compose.retry_worker(settings, landing).drain(max_seconds=60)
        landing.flush()
        progress(f"retry worker drained parked cleanups ({drained})")
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
            simulation, events, outcomes, _consumer_stats(settings.consumer.state_dir), audit, reports
        )

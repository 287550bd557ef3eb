"""`make demo`: the whole product on the embedded local stack, ending in a report and its verdict.

1. the state folder: made by the demo, or one it made before (a marker file lists what it made there;
   only that is removed), never one holding anything else (refused, nothing deleted);
2. moto on 127.0.0.1 with the table, the TTL emulator, the fake Array (every account it is asked to
   delete exists once) and the fake transactions-service, all on one simulated clock where 63 days pass
   in seconds; the cleanup's retry queue (the setup command's work), then the real KCL consumer (Java
   launcher + Python children, built by `entitlements.compose`) with the cleanup processor and the lake;
3. the entitlements service in this process on 127.0.0.1 (`entitlements._workload.local_service`), and
   a seeded schedule through it:
   - forced races, each forced through the fakes' hooks (never left to thread timing): a relink is held
     inside Array's processor-token call until a second Array signup (or a cancellation) of the same
     user has answered, then let go; SaveIfActive refuses its write (404, an outcome);
   - one "same account again" second signup (Array answers the account the user holds: nothing written);
   - the workload: the mix as HTTP requests from concurrent clients (`devstack.service_workload`);
   - with faults, the harm the service design guards against (docs/table.md, "The service's write paths": a
     link's stale put writing a retired row back Active): the same forced race through a second in-process
     service whose link write is devstack's fault-injection wrapper (an unconditional put), with the TTL
     emulator paused until the stale write has landed (so its stale record's expiry always meets the account
     back in use): the retired row comes back Active beside the new one, with a stale record naming its
     account; and the anomalies the service cannot produce, planted by direct table writes (string and
     millisecond ttls, a failed reactivation delete, a canary processor token);
   - what was planted is written to the manifest, `planted.json`;
4. wait until every cleanup record that can expire has expired and the consumer has read to an end of
   the stream that no longer moves; drain the retry queue to empty and replay parked batches, while the
   consumer runs (so it lands the rows they mark Removed), and wait for the stream's end again; stop the
   consumer gracefully, then the service, the fakes and the stack;
5. only then (nothing the demo started still running: checked, threads and the consumer's processes),
   snapshot the lake, summarise the events by kind and the cleanup outcomes, run the audits and judge
   them against the manifest (`entitlements._demo_verdict`): "demo OK: N planted faults found, 0
   unexpected findings", or the differences.
"""

from __future__ import annotations

__all__ = ["DIRECT_WRITE_FAULTS", "DemoOptions", "DemoResult", "ForcedRaces", "counts_text", "run_demo"]

import dataclasses
import functools
import itertools
import json
import os
import random
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx

from analytics import lake_from_settings, snapshot
from analytics.audits import AuditReport, load_config, render_report, run_audits
from analytics.lake.views import connect
from config import Settings, load_settings
from devstack._fake_http import Hooks
from devstack.direct_writes import DirectWrites
from devstack.fake_array import PROCESSOR_TOKEN, FakeArrayServer
from devstack.fake_transactions import FakeTransactionsServer
from devstack.planted_faults import FaultKind, PlantedFault, PlantedItem, plant_faults
from devstack.service_workload import WorkloadConfig, WorkloadSummary, run_service_workload
from devstack.stack import LocalStack
from devstack.ttl_emulator import TtlEmulator
from devstack.workload import SimulationConfig
from entitlements import compose
from entitlements._clients import aws_client
from entitlements._demo_verdict import MANIFEST_NAME, Verdict, judge, read_manifest, write_manifest
from entitlements._progress import LINE_SECONDS
from entitlements._workload import local_service
from entitlements.commands._stores import build_recovery
from pipeline import DaemonSpec, KclDaemon
from schema.clock import SimulatedClock
from schema.errors import DemoError
from schema.table import entitlement_key, stale_key

_LOCAL = "testing"
MARKER_NAME = ".entitlements-demo.json"  # in the state folder: what the demo made there
SUMMARY_NAME = "demo.json"
_POLL_SECONDS = 0.25
_OVERLAP_MARGIN_SECONDS = 1.0  # a planted overlap lasts the audits' tolerance and this much more (real time)
_RUNS = itertools.count(1)  # runs in this process: moto's state is process-wide


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
    # Bursts per second of two simultaneous requests for one user (`devstack.service_workload`): the
    # races the service's own guard must decide, arising by themselves beside the mix (a loser's account
    # gets a Superseded row and a stale record, so cleanup deletes it and marks that row Removed).
    concurrent_same_user: float = 5.0
    # Simulated seconds per real second: 63 days in about 15 real seconds.
    speed: float = 63 * 86_400 / 15
    timeout_seconds: float = 600.0  # for each wait (expiries, the stream's end, the retry queue)
    # Faults recorded in the manifest as planted but never written: the verdict must name them missing.
    suppressed: frozenset[FaultKind] = frozenset()
    # After the workload, Array refuses this many account deletes (expired credentials): the consumer
    # parks those cleanups in the retry queue, and the retry worker must finish them before the report.
    refused_deletes: int = 0


# The anomalies the service cannot produce: planted by direct table writes, labelled so.
DIRECT_WRITE_FAULTS = (
    FaultKind.FAILED_REACTIVATION_DELETE,
    FaultKind.STRING_TTL,
    FaultKind.MILLISECOND_TTL,
    FaultKind.TOKEN_CANARY,
)


def counts_text(counts: Mapping[str, int]) -> str:
    """`201: 5, 409: 5` (sorted), or `none`: counts as a reader reads them, never a Python dict."""
    return ", ".join(f"{key}: {n}" for key, n in sorted(counts.items())) or "none"


@dataclass
class ForcedRaces:
    """What the seeded schedule's forced races came to (counts only)."""

    relink_vs_second_signup: dict[str, int] = field(default_factory=dict)  # link status -> count
    relink_vs_cancellation: dict[str, int] = field(default_factory=dict)
    same_account_again: dict[str, int] = field(default_factory=dict)  # second signup status -> count
    unguarded_stale_put: dict[str, int] = field(default_factory=dict)
    overwritten_rows: int = 0  # what the unguarded wrapper counted (stale link puts SaveIfActive refuses)


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
    verdict: Verdict


@dataclass
class _System:
    """What the running system came to, handed to the report once everything has stopped."""

    settings: Settings
    workload: WorkloadSummary
    races: ForcedRaces
    planted: list[PlantedFault]
    consumer_stats: dict[str, Any] = field(default_factory=dict)
    retry_worker: dict[str, Any] = field(default_factory=dict)  # what draining the retry queue did
    differences: list[str] = field(default_factory=list)  # the run did not finish cleanly


# -- the state folder --------------------------------------------------------------------------------


def _claim_state_dir(state: Path) -> None:
    """Make `state`, or empty what a previous demo made in it; refuse (deleting nothing) a folder that
    holds anything the demo did not make."""
    if state.exists() and not state.is_dir():
        raise DemoError(f"--state-dir {state} is a file: give a folder (the demo makes it when missing)")
    if not state.exists():
        state.mkdir(parents=True)
        _record_state_dir(state)
        return
    marker = state / MARKER_NAME
    present = sorted(p.name for p in state.iterdir() if p.name != MARKER_NAME)
    made: set[str] = set()
    if marker.exists():
        try:
            made = set(json.loads(marker.read_text())["made"])
        except (ValueError, KeyError, TypeError) as error:
            raise DemoError(
                f"--state-dir {state}: its {MARKER_NAME} is damaged ({type(error).__name__}); nothing "
                "was deleted: empty the folder yourself or give another --state-dir"
            ) from None
    foreign = [name for name in present if name not in made]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise DemoError(
            f"--state-dir {state} holds what the demo did not make ({shown}); nothing was deleted: give "
            "a new or empty folder, or move those out"
        )
    for name in present:
        path = state / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    _record_state_dir(state)


def _record_state_dir(state: Path) -> None:
    """Note what the demo made in `state` (everything there but the marker: it was empty or new)."""
    if not state.is_dir():
        return
    made = sorted(p.name for p in state.iterdir() if p.name != MARKER_NAME)
    (state / MARKER_NAME).write_text(json.dumps({"made_by": "entitlements demo", "made": made}) + "\n")


# -- settings and waiting ----------------------------------------------------------------------------


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
        },
        lake={"root": str(state / "lake"), "flush_seconds": 5.0},
        array={"base_url": array_url, "retry_budget_seconds": 10.0},
        service={"transactions_base_url": transactions_url, "outcome_flush_seconds": 1.0},
        clock=clock,
    )


def _wait(
    condition: Callable[[], bool],
    timeout: float,
    what: str,
    progress: Callable[[str], None],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Poll `condition` until it holds or `timeout` has passed. Most waits end within seconds and say
    nothing; a longer one says so every LINE_SECONDS from twice that on (the project's progress
    convention, entitlements/_progress.py), so that a stuck run is never a minute of silence."""
    started = clock()
    next_line = 2 * LINE_SECONDS
    while not condition():
        waited = clock() - started
        if waited >= timeout:
            raise DemoError(
                f"demo: {what} did not happen within {timeout:.0f} s (see the daemon log in the state folder)"
            )
        if waited >= next_line:
            progress(f"waiting for {what}: {waited:.0f} s")
            while next_line <= waited:  # a slow poll skips the lines it overran: one line, not several
                next_line += LINE_SECONDS
        sleep(_POLL_SECONDS)


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


def _wait_for_the_stream_end(
    settings: Settings, client: Callable[[str], Any], timeout: float, progress: Callable[[str], None]
) -> None:
    """Wait until the consumer has committed up to an end of the stream that no longer moves. A shard's
    stats are written after its commit, and a commit comes after every handler's flush: once they show
    the end, the rows the cleanup marked Removed for those records are in the stream, and reading the
    end again says whether they extended it."""
    target = _last_stream_sequence(settings, client)
    while True:
        _wait(
            functools.partial(_consumed_up_to, settings, target),
            timeout,
            "the consumer reading the stream",
            progress,
        )
        now = _last_stream_sequence(settings, client)
        if now == target:
            return
        target = now


def _consumer_stats(state_dir: Path) -> dict[str, Any]:
    merged: dict[str, Any] = {
        "records": 0,
        "quarantined": 0,
        "dead_lettered": 0,
        "parked_batches": 0,
        "last_sequence_number": None,
    }
    for path in sorted((state_dir / "stats").glob("*.json")):
        stats = json.loads(path.read_text())
        merged["records"] += stats["records"]
        merged["quarantined"] += stats["quarantined"]
        merged["dead_lettered"] += stats.get("dead_lettered", 0)
        merged["parked_batches"] += stats["parked_batches"]
        merged["last_sequence_number"] = stats["last_sequence_number"]
        merged["iterator_age_ms"] = stats.get("iterator_age_ms")
    return merged


# -- the schedule through the service -----------------------------------------------------------------


def _count(into: dict[str, int], status: int) -> None:
    into[str(status)] = into.get(str(status), 0) + 1


@dataclass(frozen=True)
class _Race:
    racer_status: int
    link_status: int
    account: str  # the user's account when the relink read the row
    racer_account: str | None  # the account the racer's answer names (a second signup's new one)


def _forced_race(
    http: httpx.Client, array: FakeArrayServer, service_url: str, user: str, racer: str
) -> _Race:
    """Sign `user` up, then hold their relink inside Array's processor-token call until `racer` (the
    route of a second signup or a cancellation) has answered; let it go."""
    signed = http.post(f"{service_url}/{user}/signup")
    signed.raise_for_status()
    account = signed.json()["arrayAccountId"]
    event = f"race/{user}"
    hold = array.hold(PROCESSOR_TOKEN, key=account, until=event)
    with ThreadPoolExecutor(1) as pool:
        link = pool.submit(http.post, f"{service_url}/{user}/processor")
        try:
            if not hold.wait_arrived(60):
                raise DemoError("demo: the held relink never reached the fake Array")
            answer = http.post(f"{service_url}/{user}/{racer}")
        finally:
            array.hooks.set(event)
        racer_account = answer.json().get("arrayAccountId") if answer.is_success else None
        return _Race(answer.status_code, link.result(timeout=120).status_code, account, racer_account)


def _schedule_users(seed: int, count: int, namespace: str) -> list[str]:
    rng = random.Random(f"{seed}/races")  # noqa: S311 (a reproducible schedule, not a secret)
    return [f"{namespace}{uuid.UUID(int=rng.getrandbits(128), version=4)}" for _ in range(count)]


def _stale_put_race_fault(user: str, race: _Race | None) -> PlantedFault:
    """The manifest's entry for the harm the service design guards against, made by the unguarded link
    write (docs/table.md; a suppressed one names accounts never written)."""
    account = race.account if race else "unwritten-account"
    new = race.racer_account if race and race.racer_account else "unwritten-new-account"
    row, new_row, stale = entitlement_key(user, account), entitlement_key(user, new), stale_key(user, account)
    return PlantedFault(
        fault_id="",
        kind=FaultKind.STALE_PUT_RACE,
        items=(
            PlantedItem("resurrected_row", row["pk"], row["sk"]),
            PlantedItem("new_row", new_row["pk"], new_row["sk"]),
            PlantedItem("stale_record_naming_account_in_use", stale["pk"], stale["sk"]),
        ),
        array_account_id=account,
        user_id=user,
    )


@contextmanager
def _paused(emulator: TtlEmulator) -> Iterator[None]:
    emulator.stop()
    try:
        yield
    finally:
        emulator.start()


def _run_races(
    options: DemoOptions,
    settings: Settings,
    fakes: tuple[FakeArrayServer, TtlEmulator],
    service_url: str,
    races: ForcedRaces,
    *,
    namespace: str,
) -> list[PlantedFault]:
    """The forced races; with faults, the harm the service design guards against (docs/table.md),
    made through the unguarded link write (returned as the manifest's entry)."""
    array, emulator = fakes
    users = iter(_schedule_users(options.seed, 2 * options.races + 2, namespace))
    planted: list[PlantedFault] = []
    with httpx.Client(timeout=120) as http:
        for _ in range(options.races):
            race = _forced_race(http, array, service_url, next(users), "array-signup")
            _count(races.relink_vs_second_signup, race.link_status)
            race = _forced_race(http, array, service_url, next(users), "cancellation")
            _count(races.relink_vs_cancellation, race.link_status)
        same = next(users)
        http.post(f"{service_url}/{same}/signup").raise_for_status()
        array.reuse_next(same)
        _count(races.same_account_again, http.post(f"{service_url}/{same}/array-signup").status_code)
        if options.faults:
            harmed = next(users)
            if FaultKind.STALE_PUT_RACE in options.suppressed:
                planted.append(_stale_put_race_fault(harmed, None))
                return planted
            unguarded_sink = compose.lake_handler(settings, name="demo-unguarded-outcomes")
            # Paused so that the stale record cannot expire (1 simulated day is a fraction of a second)
            # before the stale write has put its account back in use (the guard always meets it
            # Active), and so that it names the account in use for longer than the audits' overlap
            # tolerance (they always see it), whatever the machine's load.
            tolerance = load_config(policy=settings.policy).parameters.overlap_tolerance_seconds
            with (
                _paused(emulator),
                local_service(settings, unguarded_links=True, sink=unguarded_sink) as unguarded,
            ):
                race = _forced_race(http, array, unguarded.url, harmed, "array-signup")
                _count(races.unguarded_stale_put, race.link_status)
                assert unguarded.unguarded is not None
                races.overwritten_rows = unguarded.unguarded.snapshot()["overwritten"]
                time.sleep(tolerance + _OVERLAP_MARGIN_SECONDS)
            planted.append(_stale_put_race_fault(harmed, race))
    return planted


def _drive_the_service(
    options: DemoOptions,
    settings: Settings,
    *,
    fakes: tuple[FakeArrayServer, TtlEmulator],
    clock: SimulatedClock,
    dynamodb: Any,
    progress: Callable[[str], None],
) -> tuple[WorkloadSummary, ForcedRaces, list[PlantedFault]]:
    """Step 3: the forced races, the workload through the service, the harm and the planted anomalies."""
    races = ForcedRaces()
    # moto's state outlives a run in the same process: each run's users carry the run's own prefix.
    namespace = f"s{options.seed}r{next(_RUNS)}-"
    with local_service(settings) as service:
        progress(f"entitlements service on {service.url}")
        planted = _run_races(options, settings, fakes, service.url, races, namespace=namespace)
        progress(
            f"forced races: relink vs second signup {counts_text(races.relink_vs_second_signup)}, relink "
            f"vs cancellation {counts_text(races.relink_vs_cancellation)} (link answers by status)"
        )
        workload = run_service_workload(
            WorkloadConfig(
                users=options.users,
                operations=options.operations,
                clients=options.clients,
                seed=options.seed,
                rate=options.rate,
                namespace=namespace,
                concurrent_same_user=options.concurrent_same_user,
            ),
            service.url,
        )
    progress(
        f"workload: {sum(workload.operations.values())} requests from {options.clients} clients, "
        f"{workload.relinks_rejected} relinks refused by SaveIfActive"
    )
    if workload.same_user is not None:
        progress(
            f"same-user bursts: {workload.same_user.bursts} ({workload.same_user.requests} requests, "
            f"{workload.same_user.concurrent_request} answered 409 concurrent_request, "
            f"{workload.same_user.undocumented} undocumented answers)"
        )
    if options.faults:
        config = SimulationConfig(
            table_name="entitlements",
            cleanup_ttl_days=settings.policy.cleanup_ttl_days,
            stale_entitlement_ttl_days=settings.policy.stale_entitlement_ttl_days,
            seed=options.seed,
            faults=True,
        )
        planted += plant_faults(
            config,
            DirectWrites(dynamodb, "entitlements"),
            clock,
            DIRECT_WRITE_FAULTS,
            namespace=namespace,
            unwritten=options.suppressed,
        )
        progress(
            "the harm SaveIfActive guards against, made by an unguarded link write: "
            f"{races.overwritten_rows} row(s) overwritten; "
            f"planted by direct writes: {len(planted) - 1} anomalies"
        )
        if options.suppressed:
            progress(
                "recorded as planted but never written (the verdict must miss them): "
                + ", ".join(sorted(kind.value for kind in options.suppressed))
            )
    planted = [dataclasses.replace(f, fault_id=f"F{i:03d}") for i, f in enumerate(planted, start=1)]
    return workload, races, planted


# -- finishing: the retry queue, parked batches, stopping everything ----------------------------------


def _finish_parked_work(
    options: DemoOptions,
    settings: Settings,
    client: Callable[[str], Any],
    system: _System,
    progress: Callable[[str], None],
) -> None:
    """While the consumer runs (it lands the rows they mark Removed): drain the retry queue to empty and
    replay the batches the consumer parked; then wait for the stream's end again."""
    drained = compose.drain_retry_queue(settings, max_seconds=options.timeout_seconds)
    system.retry_worker = dataclasses.asdict(drained)
    progress(
        f"retry worker: {drained.received} parked cleanup(s) received, {drained.finished} finished, "
        f"{drained.reparked} parked again; queue empty: {drained.empty}"
    )
    if not drained.empty:
        system.differences.append(
            f"the cleanup retry queue was not empty after {options.timeout_seconds:.0f} s: their rows "
            "may not be marked Removed in the lake"
        )
    if _consumer_stats(settings.consumer.state_dir)["parked_batches"]:
        replayed = build_recovery(settings).replay_parked()
        progress(f"parked batches replayed; still parked: {replayed.remaining}")
        if replayed.remaining:
            system.differences.append(
                f"{replayed.remaining} parked batch(es) did not replay (`entitlements replay-parked`)"
            )
    _wait_for_the_stream_end(settings, client, options.timeout_seconds, progress)


def _live_processes_in_group(pgid: int) -> int:
    """Processes of the group `pgid` that are not zombies (Linux /proc; 0 where it is absent)."""
    live = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[2]) == pgid and fields[0] != "Z":
            live += 1
    return live


def _stop_consumer(daemon: KclDaemon, system: _System, progress: Callable[[str], None]) -> None:
    pgid = daemon.pid
    started = time.monotonic()
    timeout = 90.0
    daemon.stop(timeout=timeout)
    if time.monotonic() - started >= timeout:
        system.differences.append(f"the consumer did not stop within {timeout:.0f} s and was killed")
    if pgid is not None:
        deadline = time.monotonic() + 10
        while _live_processes_in_group(pgid) and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
        if _live_processes_in_group(pgid):
            os.killpg(pgid, signal.SIGKILL)
            system.differences.append("consumer processes outlived the daemon's stop and were killed")
    progress("consumer stopped")


def _still_running(started: set[threading.Thread]) -> list[str]:
    """Threads this run started that are still alive (each given a few seconds to end)."""
    late = [t for t in threading.enumerate() if t not in started and t is not threading.current_thread()]
    for thread in late:
        thread.join(timeout=5.0)
    return sorted(t.name for t in late if t.is_alive() and not t.name.startswith("ThreadPoolExecutor"))


def _check_the_clock(options: DemoOptions, settings: Settings) -> None:
    """A planted cancellation record names an account in use until it expires: for longer than the
    audits' overlap tolerance, or they could not see it."""
    policy = settings.policy
    tolerance = load_config(policy=policy).parameters.overlap_tolerance_seconds
    if policy.cleanup_ttl_days * 86_400 / options.speed < tolerance + 2 * _OVERLAP_MARGIN_SECONDS:
        raise DemoError(
            f"demo: the simulated clock is too fast: {policy.cleanup_ttl_days} days must last at least "
            f"{tolerance + 2 * _OVERLAP_MARGIN_SECONDS:.0f} s (lower --days-per-second)"
        )


def _run_the_system(options: DemoOptions, progress: Callable[[str], None]) -> _System:
    """Steps 2 to 4. Everything started here has stopped when this returns (or the run says not)."""
    threads_before = set(threading.enumerate())
    now = datetime.now(UTC)
    clock = SimulatedClock(now, now, options.speed)
    clock_settings: dict[str, str | float] = {
        "start": now.isoformat(),
        "anchor": now.isoformat(),
        "speed": options.speed,
    }
    hooks = Hooks()
    with ExitStack() as running:
        stack = LocalStack(
            clock=clock, region="eu-west-1", table_name="entitlements", ttl_interval_seconds=0.5
        )
        endpoints = running.enter_context(stack)
        array = running.enter_context(
            FakeArrayServer(every_account_exists=True, hooks=hooks, seed=options.seed)
        )
        transactions = running.enter_context(FakeTransactionsServer(hooks=hooks, seed=options.seed))
        assert endpoints.stream_arn is not None
        settings = _settings(
            options,
            endpoints.endpoint_url,
            endpoints.stream_arn,
            (array.url, transactions.url),
            clock_settings,
        )
        _check_the_clock(options, settings)
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
        system = _System(settings, WorkloadSummary(options.seed, 0, 0, 0), ForcedRaces(), [])
        running.callback(_stop_consumer, daemon, system, progress)  # first to stop: it needs the stack
        dynamodb = client("dynamodb")
        system.workload, system.races, system.planted = _drive_the_service(
            options,
            settings,
            fakes=(array, stack.ttl_emulator),
            clock=clock,
            dynamodb=dynamodb,
            progress=progress,
        )
        write_manifest(options.state_dir / MANIFEST_NAME, options.seed, system.planted)
        if options.refused_deletes:  # only deletes are left to call Array: the cleanup parks them
            array.expire_credentials(calls=options.refused_deletes)
        _wait(
            lambda: _pending_expiries(dynamodb, "entitlements", clock.now().timestamp()) == 0,
            options.timeout_seconds,
            "every cleanup record expiring",
            progress,
        )
        progress("every cleanup record that can expire has expired")
        _wait_for_the_stream_end(settings, client, options.timeout_seconds, progress)
        progress("the consumer reached the end of the stream")
        _finish_parked_work(options, settings, client, system, progress)
        progress("the consumer reached the end of the stream again")
    lingering = _still_running(threads_before)
    if lingering:
        system.differences.append(f"still running when the report was read: {', '.join(lingering)}")
    stats = _consumer_stats(system.settings.consumer.state_dir)
    system.consumer_stats = stats
    for what, command in (("quarantined", "quarantine"), ("dead_lettered", "dead-letter")):
        if stats[what]:
            system.differences.append(
                f"the consumer {what.replace('_', '-')} {stats[what]} record(s): "
                f"`entitlements {command} list`"
            )
    return system


# -- the report --------------------------------------------------------------------------------------


def _traces(state: Path, token: str) -> list[str]:
    """The files of the run (lake, reports, logs; not the manifest, which names it) that hold `token`."""
    found: list[str] = []
    needle = token.encode()
    with duckdb.connect() as con:
        for path in sorted(p for p in state.rglob("*") if p.is_file()):
            if path.name in (MANIFEST_NAME, MARKER_NAME):
                continue
            if path.suffix == ".parquet":  # compressed: read it, do not grep it
                hits = con.execute(
                    "SELECT count(*) FROM read_parquet(?) AS t WHERE CAST(t AS VARCHAR) LIKE ?",
                    [str(path), f"%{token}%"],
                ).fetchone()
                held = bool(hits and hits[0])
            else:
                held = needle in path.read_bytes()
            if held:
                found.append(str(path.relative_to(state)))
    return found


def _report(options: DemoOptions, system: _System, progress: Callable[[str], None]) -> DemoResult:
    """Step 5, over the lake on disk (the stack, the service and the consumer have stopped)."""
    settings = system.settings
    lake = lake_from_settings(settings)
    progress("snapshotting the lake and counting its events and outcomes")
    snapshot(lake)
    with connect(lake) as con:
        events = dict(
            con.execute("SELECT event_type, count(*) FROM changes GROUP BY 1 ORDER BY 1").fetchall()
        )
        outcomes = dict(con.execute("SELECT kind, count(*) FROM outcomes GROUP BY 1 ORDER BY 1").fetchall())
    progress("auditing the lake")
    audit = run_audits(lake, load_config(policy=settings.policy))
    reports = {}
    for fmt, name in (("markdown", "audit.md"), ("html", "audit.html"), ("json", "audit.json")):
        path = options.state_dir / name
        path.write_text(render_report(audit, fmt))
        reports[fmt] = path
    # What to expect comes from the manifest as written, read back.
    manifest = read_manifest(options.state_dir / MANIFEST_NAME)
    verdict = judge(
        manifest,
        audit,
        traces_of=functools.partial(_traces, options.state_dir),
        differences=system.differences,
    )
    summary = {
        "seed": options.seed,
        "verdict": verdict.to_json(),
        "races": dataclasses.asdict(system.races),
        "workload": system.workload.to_json(),
        "events_by_type": events,
        "outcomes_by_kind": outcomes,
        "consumer": system.consumer_stats,
        "retry_worker": system.retry_worker,
    }
    (options.state_dir / SUMMARY_NAME).write_text(json.dumps(summary, indent=1, default=str) + "\n")
    reports["summary"] = options.state_dir / SUMMARY_NAME
    progress("report and verdict written")
    return DemoResult(
        system.workload,
        system.races,
        system.planted,
        events,
        outcomes,
        system.consumer_stats,
        audit,
        reports,
        verdict,
    )


def run_demo(options: DemoOptions, progress: Callable[[str], None]) -> DemoResult:
    if options.suppressed and not options.faults:
        raise DemoError("demo: --suppress-fault needs --faults (there is nothing planted to suppress)")

    _claim_state_dir(options.state_dir)
    try:
        system = _run_the_system(options, progress)
        return _report(options, system, progress)
    finally:
        _record_state_dir(options.state_dir)

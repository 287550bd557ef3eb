"""Records as the real KCL daemon delivers them to a kclpy child, captured once and cached for the benches.

How a capture is made (`produce`, about a minute: the daemon's cold start is most of it). moto (the
project's `devstack.moto_server`, in this process) holds one table made by `pipeline.tables.create_table`
(TTL enabled). devstack's workload simulator (`devstack.simulator`, the service's documented writes
through `devstack._writes`) runs a fixed, seeded mix: signups, cancellations, reactivations, second
signups and relinks, no planted faults, on a simulated clock running `SPEED` times real time. Beside it
the TTL emulator (`devstack.ttl_emulator`, sharing that clock and moto's lock) deletes the cancellation
and stale records whose TTL has passed, so the stream holds REMOVE records carrying the TTL identity,
interleaved with the writes as in production. Once every TTL the run wrote has passed and a last pass
has run, the writes stop. The mix is seeded, but expiries race the writes in real time (a reactivation
is only tried while its cancellation record lives), so two captures differ by a few records.

Then the launcher JVM (`pipeline.daemon`, the production launcher jar, the same settings as
`bench.bench_child`) reads the stream from TRIM_HORIZON with the do-nothing child `bench._null_child
--capture`, which appends each delivered record (its sequence number and its base64-decoded `data`,
exactly as kclpy gives them) to an owner-only file before it checkpoints. Once the checkpoint reaches
the stream's last record the daemon is stopped, and the capture is checked: each of the stream's
records once, in stream order (a record delivered twice is kept once), and some of them REMOVE records
with the TTL identity.

Where it is kept: `.cache/bench/` (gitignored, folder 0700, file 0600), one file per version key. The
key is `CAPTURE_VERSION` with a digest of what decides the records' bytes: the workload's parameters,
the writers' source (`devstack/_writes.py`), the launcher's pom (the KCL and adapter versions), and the
moto and amazon-kclpy versions. A change of any of them makes `load` capture again. The file is one
JSON line (the manifest: version, key, the stream ARN and shard id the records were read from, the
counts, the simulator's summary, which holds counts only) followed by the records' frames
(`bench._capture_format`). Every id in it is synthetic (seeded UUIDs and tokens from the simulator).
"""

from __future__ import annotations

__all__ = ["CAPTURE_VERSION", "Capture", "cache_path", "load", "produce"]

import hashlib
import importlib.metadata
import json
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from bench._capture_format import frame, read_frames
from bench._daemon import LAUNCHER_JAR, bench_daemon, stream_sequence_numbers
from bench.bench_child import (
    NULL_CHILD,
    START_TIMEOUT,
    STOP_TIMEOUT,
    _checkpoint,
    _client,
    _settings,
    _wait,
)
from devstack.direct_writes import DirectWrites
from devstack.moto_server import MotoServer
from devstack.simulator import run_simulation
from devstack.ttl_emulator import TtlEmulator
from devstack.workload import SimulationConfig
from pipeline import create_table
from schema import write_private_file
from schema.clock import SimulatedClock

REPO = Path(__file__).resolve().parents[1]
CACHE_DIR = REPO / ".cache" / "bench"
CAPTURE_VERSION = 1
# The workload: about 2,000 stream records. 63 simulated days pass in 8 real seconds, so cancellation
# records (ttl 63 days) expire while the run still writes and stale records (ttl 1 day) within a tick.
SEED = 20261201
USERS = 900
OPERATIONS = 2_400
SPEED = 63 * 86_400 / 8
CLEANUP_TTL_DAYS = 63
STALE_TTL_DAYS = 1
TTL_PASS_SECONDS = 0.2
# The daemon never calls the Array: its settings only need a well-formed URL (a closed loopback port).
UNUSED_ARRAY_URL = "http://127.0.0.1:9"


@dataclass(frozen=True)
class Capture:
    """Captured records: (sequence number, data) in stream order, and where they were read from."""

    records: list[tuple[str, bytes]]
    stream_arn: str
    shard_id: str
    manifest: dict[str, Any]
    path: Path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def version_key() -> str:
    """`CAPTURE_VERSION` and a digest of everything that decides the captured bytes."""
    decided_by = {
        "workload": {
            "seed": SEED,
            "users": USERS,
            "operations": OPERATIONS,
            "speed": SPEED,
            "cleanup_ttl_days": CLEANUP_TTL_DAYS,
            "stale_ttl_days": STALE_TTL_DAYS,
        },
        "writes": _digest(REPO / "devstack" / "_writes.py") + _digest(REPO / "schema" / "table_writes.py"),
        "launcher_pom": _digest(REPO / "pipeline" / "launcher" / "pom.xml"),
        "moto": importlib.metadata.version("moto"),
        "amazon-kclpy": importlib.metadata.version("amazon-kclpy"),
    }
    digest = hashlib.sha256(json.dumps(decided_by, sort_keys=True).encode()).hexdigest()[:16]
    return f"v{CAPTURE_VERSION}-{digest}"


def cache_path() -> Path:
    return CACHE_DIR / f"decode-capture-{version_key()}.bin"


def _parse(path: Path) -> Capture:
    blob = path.read_bytes()
    head, _, body = blob.partition(b"\n")
    manifest = orjson.loads(head)
    records = read_frames(body)
    if manifest.get("version") != CAPTURE_VERSION or manifest.get("records") != len(records):
        raise ValueError(f"{path}: the manifest does not match the capture")
    return Capture(records, str(manifest["stream_arn"]), str(manifest["shard_id"]), manifest, path)


def load(*, refresh: bool = False) -> Capture:
    """The cached capture for the current version key, captured first (through the daemon) when absent."""
    path = cache_path()
    if refresh or not path.exists():
        produce(path)
    return _parse(path)


def _write_workload(moto: MotoServer, table_name: str) -> tuple[dict[str, Any], int]:
    """The simulator's run with the TTL emulator beside it; returns its summary (counts only) and how
    many items the emulator deleted."""
    now = datetime.now(UTC)
    clock = SimulatedClock(now, now, SPEED)
    emulator = TtlEmulator(
        clock, interval_seconds=TTL_PASS_SECONDS, lock=moto.dynamodb_lock, table_names=[table_name]
    )
    config = SimulationConfig(
        table_name=table_name,
        cleanup_ttl_days=CLEANUP_TTL_DAYS,
        stale_entitlement_ttl_days=STALE_TTL_DAYS,
        users=USERS,
        operations=OPERATIONS,
        seed=SEED,
    )
    with emulator:
        summary = run_simulation(config, DirectWrites(_client(moto.endpoint, "dynamodb"), table_name), clock)
        # Every TTL written has passed (the last cancellation's, plus a pass interval), then one last pass.
        time.sleep(clock.real_seconds_for(timedelta(days=CLEANUP_TTL_DAYS)) + 2 * TTL_PASS_SECONDS)
    emulator.run_once()
    return summary.to_json(include_keys=False), emulator.deleted_total


def produce(path: Path) -> None:
    """Capture the records the daemon delivers for the workload, and write them (owner-only) to `path`."""
    if not LAUNCHER_JAR.exists():
        raise SystemExit(f"bench capture: the launcher jar is missing ({LAUNCHER_JAR}); run `make setup`")
    started = time.monotonic()
    print(f"\n(capturing the daemon's records into {path}: about a minute)", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp, MotoServer() as moto:
        dynamodb = _client(moto.endpoint, "dynamodb")
        streams = _client(moto.endpoint, "dynamodbstreams")
        table = create_table(dynamodb, f"entitlements-capture-{uuid.uuid4().hex[:6]}")
        summary, ttl_deleted = _write_workload(moto, table.table_name)
        numbers = stream_sequence_numbers(streams, table.stream_arn)
        shards = streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"]
        if len(shards) != 1 or not numbers:
            raise SystemExit(f"bench capture: expected one shard with records, got {len(shards)} shard(s)")

        capture_file = Path(tmp) / "capture.bin"
        settings = _settings(
            moto.endpoint,
            table.table_name,
            Path(tmp) / "consumer",
            f"bench-capture-{uuid.uuid4().hex[:6]}",
            UNUSED_ARRAY_URL,
        )
        daemon, _log = bench_daemon(
            settings,
            stream_arn=table.stream_arn,
            worker_id="bench",
            child=(NULL_CHILD, "--capture", str(capture_file)),
        )
        application = settings.consumer.application_name
        daemon.start()
        try:
            last = int(numbers[-1])
            _wait(
                lambda: (_checkpoint(dynamodb, application) or 0) >= last,
                START_TIMEOUT + 60,
                "the capturing child to checkpoint the stream's last record",
            )
        finally:
            daemon.stop(timeout=STOP_TIMEOUT)
        delivered = read_frames(capture_file.read_bytes()) if capture_file.exists() else []

    first: dict[str, bytes] = {}
    for number, data in delivered:
        first.setdefault(number, data)
    if sorted(first, key=int) != numbers:
        raise SystemExit(
            f"bench capture: the child was given {len(first)} distinct records, "
            f"the stream holds {len(numbers)}"
        )
    ttl_identity = sum(
        1
        for number in numbers
        if (orjson.loads(first[number]).get("userIdentity") or {}).get("type") == "Service"
    )
    if ttl_identity == 0:
        raise SystemExit(
            "bench capture: no record carries the TTL identity (the TTL emulator deleted nothing)"
        )
    manifest = {
        "version": CAPTURE_VERSION,
        "key": version_key(),
        "captured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "stream_arn": table.stream_arn,
        "shard_id": shards[0]["ShardId"],
        "records": len(numbers),
        "delivered": len(delivered),
        "ttl_deleted": ttl_deleted,
        "ttl_identity_records": ttl_identity,
        "simulation": summary,
    }
    body = b"".join(frame(number, first[number]) for number in numbers)
    write_private_file(path, orjson.dumps(manifest) + b"\n" + body)
    print(
        f"(captured {len(numbers):,} records in {time.monotonic() - started:,.0f} s, "
        f"{ttl_identity} of them REMOVE records with the TTL identity)",
        flush=True,
    )

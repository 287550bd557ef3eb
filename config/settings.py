"""The one settings object, built once at an entry point and passed down.

Every value comes from the environment with the prefix ENTITLEMENTS_ and `__` between nested names,
for example ENTITLEMENTS_AWS__ENDPOINT_URL or ENTITLEMENTS_POLICY__CLEANUP_TTL_DAYS. Library code never
reads the environment itself; it is handed the part of this object it needs.

Refused settings raise `SettingsError`, whose message names each refused field (as its environment
variable) and the rule it broke, and never the value: a mistyped secret must not reach a log. A variable
with the prefix that names no setting (ENTITLEMENTS_LAKE_ROOT for ENTITLEMENTS_LAKE__ROOT) is refused
too, by name, with the closest known name: a typo is never silently ignored.
"""

from __future__ import annotations

__all__ = [
    "ArraySettings",
    "AwsSettings",
    "BootstrapSettings",
    "CleanupSettings",
    "ClockSettings",
    "ConsumerSettings",
    "ErasureSettings",
    "LakeSettings",
    "MetricsSettings",
    "PolicySettings",
    "ServiceSettings",
    "Settings",
    "SettingsError",
    "SourceSettings",
    "arrow_environment",
    "installed_launcher_jar",
    "known_variables",
    "load_settings",
    "settings_environment",
    "unknown_variables",
]

import difflib
import importlib.util
import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import pydantic_settings
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from schema.errors import TerminalError

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class AwsSettings(BaseModel):
    """Where AWS is. `endpoint_url` points every service at one place (moto); each may be overridden."""

    model_config = _FROZEN
    region: str = "eu-west-1"
    endpoint_url: str | None = None
    dynamodb_endpoint: str | None = None
    streams_endpoint: str | None = None
    cloudwatch_endpoint: str | None = None
    sqs_endpoint: str | None = None
    sns_endpoint: str | None = None
    s3_endpoint: str | None = None
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    # Attempts per AWS call (botocore's standard retry mode) where a part does not set its own.
    max_attempts: int = Field(default=5, ge=1, le=20)

    @field_validator(
        "endpoint_url",
        "dynamodb_endpoint",
        "streams_endpoint",
        "cloudwatch_endpoint",
        "sqs_endpoint",
        "sns_endpoint",
        "s3_endpoint",
    )
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        """botocore takes any text and fails later as an unexpected ValueError; the rule named here, and
        never the value (an endpoint can hold credentials)."""
        if url is None:
            return None
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 (raises on a port that is not a number or out of range)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise PydanticCustomError(
                "http_url",
                "must be an http:// or https:// URL with a host (and a port of 1 to 65535), e.g. "
                "http://127.0.0.1:5000",
            )
        return url

    def endpoint(self, service: str) -> str | None:
        specific: str | None = getattr(self, f"{service}_endpoint", None)
        return specific or self.endpoint_url


class PolicySettings(BaseModel):
    """The service's cleanup policy (docs/operations/cleanup.md). Owned here; the simulator and the audits
    read it."""

    model_config = _FROZEN
    cleanup_ttl_days: int = Field(
        default=63, ge=1, description="CLEANUP_TTL_DAYS: grace after a cancellation"
    )
    stale_entitlement_ttl_days: int = Field(
        default=1, ge=1, description="STALE_ENTITLEMENT_TTL_DAYS: delay before a superseded account goes"
    )


class ClockSettings(BaseModel):
    """A simulated clock shared by the simulator, the TTL emulator and the processors.

    With no start the clock is the real one. With a start, simulated time is
    start + (now - epoch_anchor) * speed, where `anchor` is the real instant the simulation began.
    """

    model_config = _FROZEN
    start: datetime | None = None
    anchor: datetime | None = None
    speed: float = Field(default=1.0, gt=0)


_LAUNCHER_JAR = Path("launcher", "target", "entitlements-kcl-launcher.jar")


def installed_launcher_jar() -> Path:
    """The launcher jar where the installed `pipeline` package keeps it (pipeline/launcher/target/),
    found without importing the package, so the consumer starts from any folder."""
    spec = importlib.util.find_spec("pipeline")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    base = Path(locations[0]) if locations else Path(__file__).resolve().parents[1] / "pipeline"
    return base / _LAUNCHER_JAR


class ConsumerSettings(BaseModel):
    model_config = _FROZEN
    table_name: str = "entitlements"
    stream_arn: str | None = None
    application_name: str = "entitlements-consumer"
    worker_id: str | None = None
    state_dir: Path = Path("var")
    # KCL timings; each one's measured effect and AWS cost: pipeline/launcher/README.md.
    # 200 ms: at most 5 GetRecords a second per shard, caught up or behind, the DynamoDB Streams limit.
    idle_time_between_reads_ms: int = Field(default=200, ge=100)
    failover_time_ms: int = Field(default=10000, ge=1000)
    shard_sync_interval_ms: int = Field(default=60000, ge=1000)
    lease_assignment_interval_ms: int = Field(default=1000, ge=500)
    # The worker-metrics reporter: first report after twice the capture period, then every period.
    worker_metrics_capture_ms: int = Field(default=250, ge=100)
    worker_metrics_report_ms: int = Field(default=5000, ge=1000)
    # The CPU figure KCL 3 balances leases by: "cpu" (the launcher's own, no platform probe), "platform" (KCL
    # picks one by probing the ECS, EKS and EC2 metadata addresses), "off" (no balancing by load).
    worker_metrics: Literal["cpu", "platform", "off"] = "cpu"
    # KCL 3's graceful lease handoff (the old owner checkpoints before a moved lease is taken). Off: in
    # KCL 3.1.3 a handoff asked before the shard's consumer initialised leaves the shard unread until a
    # restart (the launcher's SchedulerSettings says more); without it a moved lease is replayed from
    # its last checkpoint, which the lake and the cleanup absorb.
    graceful_lease_handoff: bool = False
    metrics_enabled: bool = False
    handler_retry_attempts: int = Field(default=5, ge=1)
    handler_retry_max_seconds: float = Field(default=10.0, gt=0)
    initial_position: str = "TRIM_HORIZON"
    # A handler on lanes (pipeline.lanes; the cleanup, whose lanes are `array.concurrency`) stops
    # waiting, at a flush, for work running this long once the rest ended: the rest's outcomes land and
    # the checkpoint stays below the slow work until a later flush collects it. None: wait for all.
    lane_slow_after_seconds: float | None = Field(default=2.0, gt=0)
    # The consumer flushes every handler and then checkpoints when either bound is reached.
    commit_every_records: int = Field(default=10_000, ge=1)
    commit_interval_seconds: float = Field(default=5.0, gt=0)
    # A tap for tests and debugging: every event's identity appended to this JSON-lines file.
    event_journal: Path | None = None
    # Default: the installed package's jar (`installed_launcher_jar`); a relative path is from the folder
    # the command runs in.
    launcher_jar: Path = Field(default_factory=installed_launcher_jar)
    java: str = "java"
    # The launcher JVM's options: C1 only and the serial collector start it seconds sooner on a busy
    # host (the JVM's work is I/O and JSON; measured in pipeline/launcher/README.md).
    java_options: str = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    # The launcher's own log (KCL's lines, JSON, rotated): docs/operations/logs.md.
    kcl_log_level: Literal["DEBUG", "INFO", "WARN", "ERROR"] = "INFO"
    kcl_log_max_bytes: int = Field(default=10 * 1024 * 1024, ge=4096)
    kcl_log_backups: int = Field(default=5, ge=1, le=20)

    @field_validator("state_dir")
    @classmethod
    def _a_folder(cls, path: Path) -> Path:
        """Every store is a folder under it: a file there would fail later as "File exists"."""
        if path.exists() and not path.is_dir():
            raise PydanticCustomError(
                "not_a_folder", "names a file, not a folder: name a folder (it is made if missing)"
            )
        return path

    @field_validator("launcher_jar")
    @classmethod
    def _absolute_jar(cls, path: Path) -> Path:
        return path.expanduser().absolute()

    @property
    def quarantine_dir(self) -> Path:
        return self.state_dir / "quarantine"

    @property
    def parked_dir(self) -> Path:
        return self.state_dir / "parked"

    @property
    def dead_letter_dir(self) -> Path:
        return self.state_dir / "dead-letter"


# A Kinesis data stream's ARN (partition, region, account, name: 1 to 128 of [a-zA-Z0-9_.-]).
_KINESIS_STREAM_ARN = re.compile(
    r"\Aarn:aws[a-z-]*:kinesis:[a-z0-9-]+:[0-9]{12}:stream/[A-Za-z0-9_.-]{1,128}\Z"
)


class SourceSettings(BaseModel):
    """Where the table's changes are read from (docs/operations/sources.md): its DynamoDB stream
    (`consumer.stream_arn`, the adapter's envelope) or a Kinesis data stream the table streams to
    (Kinesis Data Streams for DynamoDB: its envelope, duplicates and per-item reordering resolved by
    `pipeline.item_order`). The same handlers, lake, cleanup and erasure behind either."""

    model_config = _FROZEN
    kind: Literal["dynamodb-streams", "kinesis"] = "dynamodb-streams"
    # The Kinesis stream's ARN (kind kinesis only): the events' position names it, as a DynamoDB
    # stream's ARN names that one; a name alone is ambiguous across accounts and regions.
    stream_arn: str | None = None
    # How many of a shard's latest changes the duplicate check remembers (eventIDs and changes each),
    # so that a copy arriving a read later is dropped too; about 200 bytes a change.
    duplicate_memory: int = Field(default=100_000, ge=1, le=10_000_000)
    # The Kinesis stream's retention period as set on the stream (Kinesis: 24 h by default, 24 to 8,760
    # h): how long its records keep an erased user's data; the erasure receipt names it (kind kinesis).
    retention_hours: int = Field(default=24, ge=24, le=8760)
    # The switch-over's handover time H (docs/operations/sources.md, "Switch-over"): set on both
    # consumers, the DynamoDB stream's hands on only changes created before it and the Kinesis one only
    # those at or after it. A whole second in UTC, because the DynamoDB stream's time is whole seconds
    # (rounded down): then `t < H` is the same test on either source's time of one change. Unset: no
    # handover, every change is handed on.
    handover_at: datetime | None = None

    @field_validator("handover_at")
    @classmethod
    def _whole_utc_second(cls, at: datetime | None) -> datetime | None:
        if at is None:
            return None
        if at.tzinfo is None or at.utcoffset() is None:
            raise PydanticCustomError("handover_at_zone", "must name its time zone (Z or +00:00)")
        if at.microsecond:
            raise PydanticCustomError("handover_at_second", "must be a whole second")
        return at.astimezone(UTC)

    @field_validator("stream_arn")
    @classmethod
    def _kinesis_arn(cls, arn: str | None) -> str | None:
        if arn is not None and _KINESIS_STREAM_ARN.match(arn) is None:
            raise PydanticCustomError(
                "kinesis_stream_arn",
                "must be a Kinesis data stream's ARN: arn:aws:kinesis:REGION:ACCOUNT:stream/NAME",
            )
        return arn

    @model_validator(mode="after")
    def _arn_with_kinesis_only(self) -> SourceSettings:
        if self.kind == "kinesis" and self.stream_arn is None:
            raise PydanticCustomError(
                "kinesis_needs_stream",
                "kind kinesis needs ENTITLEMENTS_SOURCE__STREAM_ARN (the stream's ARN)",
            )
        if self.kind != "kinesis" and self.stream_arn is not None:
            raise PydanticCustomError(
                "stream_arn_without_kinesis",
                "ENTITLEMENTS_SOURCE__STREAM_ARN is read only with ENTITLEMENTS_SOURCE__KIND=kinesis",
            )
        return self


class ArraySettings(BaseModel):
    model_config = _FROZEN
    base_url: str = "http://127.0.0.1:8765"
    app_key: SecretStr = SecretStr("local-app-key")
    server_token: SecretStr = SecretStr("local-server-token")
    timeout_seconds: float = Field(default=5.0, gt=0)
    max_attempts: int = Field(default=4, ge=1)
    retry_budget_seconds: float = Field(default=20.0, gt=0)
    # The cleanup's lanes on the stream (one item's expiries in order, different items at once) and the
    # retry worker's cleanups at once.
    concurrency: int = Field(default=8, ge=1)


class CleanupSettings(BaseModel):
    """The safety valve on Array deletes, which cannot be undone (docs/operations/cleanup.md)."""

    model_config = _FROZEN
    # `shadow`: a cleanup that passed the guard records `cleanup.would_delete` and stops: no DELETE is
    # sent to Array and no row is marked Removed. `live`: deletes are sent.
    mode: Literal["live", "shadow"] = "live"
    # Array deletes sent in any rolling hour; past it the work parks for the retry worker (nothing
    # lost) and `entitlements_cleanup_deletes_held` rises. None: no budget.
    delete_budget_per_hour: int | None = Field(default=None, ge=1)
    # Who shares one budget. `process`: each consumer child and each retry worker counts its own.
    # `host`: every process with the same consumer state folder on this host shares one count.
    delete_budget_scope: Literal["process", "host"] = "process"
    # The SQS queue a consumer parks cleanups on and the retry worker drains; its dead-letter queue is
    # `<name>-dlq`. Both are made by `entitlements cleanup setup`; the children only look them up. SQS
    # names are up to 80 letters, digits, - and _: 76 here, leaving room for the suffix.
    retry_queue_name: str = Field(default="entitlements-cleanup-retry", pattern=r"^[A-Za-z0-9_-]{1,76}$")


class LakeSettings(BaseModel):
    model_config = _FROZEN
    root: str = "var/lake"
    flush_rows: int = Field(default=50_000, ge=1)
    flush_seconds: float = Field(default=60.0, gt=0)
    # The Arrow memory pool of the processes the consumer starts to land rows (its KCL children and
    # worker writer), given as ARROW_DEFAULT_MEMORY_POOL (`arrow_environment`). jemalloc hands a
    # flush's buffers back within its decay time, so a long-running landing peaks where a short one
    # does; with mimalloc, pyarrow's default, the peak over 1,000,000 events was 1.25-1.48x a
    # 100,000-event run's (`python -m bench lake`, landing memory). `default`: pyarrow's own choice.
    arrow_memory_pool: Literal["jemalloc", "mimalloc", "system", "default"] = "jemalloc"
    # Table maintenance (analytics/lake/maintenance.py; costs and the model: docs/architecture.md,
    # "Commits at scale"). A checkpoint every this many commits (the tables' delta.checkpointInterval):
    # a reader or writer opening a table replays at most this many log entries after it.
    checkpoint_interval: int = Field(default=100, ge=10, le=10_000)
    # A compaction of a table once this many commits have landed since its last one: it bounds the
    # table's uncompacted files, which every commit's cost grows with (about 0.12 ms of CPU a file on
    # a ~9 ms commit: within 1.5x of a fresh table's up to ~35 files), whatever the number of shards.
    compact_every_commits: int = Field(default=24, ge=10)
    # Tiered compaction: tier k merges files below first_tier * fanout**k every fanout**k-th round.
    compact_first_tier_bytes: int = Field(default=8 * 1024 * 1024, ge=1024 * 1024)
    compact_fanout: int = Field(default=8, ge=2)
    compact_tiers: int = Field(default=3, ge=1, le=6)
    # One maintenance runner per lake, elected through a lease committed to the lake's own small
    # Delta table (a conditional put): it holds the lease this long, renewed at half-life and before
    # each compaction, so a compaction (tier 2 included) ends well inside it.
    maintenance_lease_seconds: float = Field(default=600.0, ge=10)
    # How often each runner looks at the lease (and the leader at the tables' versions): between two
    # looks a table takes commits/s * this many files, so at 64 shards' 12.8 commits/s, 2 s keeps
    # that near compact_every_commits.
    maintenance_check_seconds: float = Field(default=2.0, gt=0)
    # Each `entitlements consume` runs a maintenance runner on a thread (the lease elects one per
    # lake); off: nothing maintains the tables unless a separate process does (commit time then grows
    # with the uncompacted files).
    maintenance_enabled: bool = True
    # Removed data files are deleted (vacuum) after this, and log entries before the newest checkpoint
    # after that: the tables' delta.deletedFileRetentionDuration and delta.logRetentionDuration.
    removed_file_retention_hours: int = Field(default=7 * 24, ge=1)
    log_retention_hours: int = Field(default=30 * 24, ge=1)
    # Who commits the consumer's landing (docs/architecture.md, "Commits at scale"). `worker`: one
    # writer process beside each KCL worker (JVM) takes every child's flush over a local socket and
    # lands the flushes that arrive together in one commit per table, so commits/s grow with workers,
    # not shards. `child`: each child commits its own flushes (one commit per shard per interval).
    writer: Literal["worker", "child"] = "worker"
    # The worker writer waits this long after a flush arrives for the other children's (unless all
    # have sent theirs): a child's flush returns after at most this plus the commit.
    writer_gather_seconds: float = Field(default=1.0, ge=0, le=30)
    # A child gives up on the writer's answer after this (its flush fails and is retried: the retry is
    # planned against the table, so a late commit of the first attempt lands nothing twice).
    writer_reply_timeout_seconds: float = Field(default=60.0, gt=0)
    # A child that cannot reach its writer (the daemon restarts a dead one at once, a crash-looping one
    # less and less often) tries again for this long before the flush fails and its window is parked.
    writer_reconnect_seconds: float = Field(default=30.0, ge=0)
    # Set by the daemon for its children (not by hand): the worker writer's address file.
    worker_writer: Path | None = None


class BootstrapSettings(BaseModel):
    """`entitlements lake bootstrap` (docs/operations/bootstrap.md): a point-in-time export (or a scan)
    landed as the lake's state at its time T before the stream's changes from T onward."""

    model_config = _FROZEN
    # Where a new export is written (the bucket must exist; DynamoDB writes under
    # <prefix>/AWSDynamoDB/<export id>/).
    export_bucket: str = "entitlements-exports"
    export_prefix: str = "bootstrap"
    poll_seconds: float = Field(default=10.0, gt=0)
    wait_timeout_seconds: float = Field(default=6 * 3600.0, gt=0)
    # A stream change this close to T counts as at or after T (the stream wins): the stream's
    # ApproximateCreationDateTime is rounded down to the second.
    time_precision_seconds: float = Field(default=1.0, ge=0)
    # The stream must hold changes from T minus this on (else the bootstrap stops, or goes on
    # with --accept-gap), and it holds them for stream_retention_hours.
    margin_seconds: float = Field(default=300.0, ge=0)
    stream_retention_hours: float = Field(default=24.0, gt=0)
    scan_segments: int = Field(default=4, ge=1, le=1_000_000)
    scan_page_items: int = Field(default=1_000, ge=1)


class ErasureSettings(BaseModel):
    model_config = _FROZEN
    subscriber: str = "entitlements"
    topic_name: str = "erasure-requests"
    queue_name: str = "entitlements-erasure"
    responses_queue_name: str = "erasure-responses"
    handler_timeout_seconds: float = Field(default=30.0, gt=0)
    max_receive_count: int = Field(default=5, ge=1)
    pass_two_delay_seconds: int = Field(default=60, ge=0)
    batch_timeout_seconds: float = Field(default=30.0, gt=0)
    metrics_namespace: str = "Entitlements/Erasure"
    ledger_key: SecretStr = SecretStr("local-erasure-ledger-key")


# A loopback address: a metrics endpoint is never served off the host.
_LOOPBACK = r"^(127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|localhost|::1)$"


class MetricsSettings(BaseModel):
    """Metrics (package `telemetry`, docs/operations/metrics.md). Each long-running process serves a
    Prometheus endpoint on its own port, on a loopback address, when its port is set (unset: none);
    CloudWatch EMF documents go to `emf_file` (appended, one per line) and/or `emf_socket` (the CloudWatch
    agent's EMF listener, `udp://127.0.0.1:25888` or `tcp://...`), never to stdout."""

    model_config = _FROZEN
    host: str = Field(default="127.0.0.1", pattern=_LOOPBACK)
    consume_port: int | None = Field(default=None, ge=1, le=65535)
    retry_worker_port: int | None = Field(default=None, ge=1, le=65535)
    erasure_worker_port: int | None = Field(default=None, ge=1, le=65535)
    service_port: int | None = Field(default=None, ge=1, le=65535)
    relinker_port: int | None = Field(default=None, ge=1, le=65535)
    emf_file: Path | None = None
    emf_socket: str | None = Field(default=None, pattern=r"^(udp|tcp)://[A-Za-z0-9.-]+:[0-9]{1,5}$")
    emf_namespace: str = Field(default="Entitlements", min_length=1, max_length=255)
    emf_interval_seconds: float = Field(default=60.0, gt=0)


class ServiceSettings(BaseModel):
    """The entitlements service (`entitlements serve`) and its relinker worker (`entitlements relinker`).

    Array's address and credentials are `ArraySettings`; transactions-service's address is here."""

    model_config = _FROZEN
    host: str = "127.0.0.1"
    port: int = Field(default=8780, ge=0, le=65535)
    transactions_base_url: str = "http://127.0.0.1:8766"
    # Each downstream call (Array, transactions-service, DynamoDB) of a request: its timeout, and bounded
    # retries with exponential backoff on transient failures, then 503 (a route) or redelivery (a job).
    http_timeout_seconds: float = Field(default=5.0, gt=0)
    max_attempts: int = Field(default=3, ge=1)
    backoff_base_seconds: float = Field(default=0.05, gt=0)
    backoff_max_seconds: float = Field(default=1.0, gt=0)
    # The outcomes the service records (links, refused retires) reach the lake at least this often.
    outcome_flush_seconds: float = Field(default=2.0, gt=0)
    relinker_queue_name: str = "entitlements-relink"
    relinker_concurrency: int = Field(default=16, ge=1)
    relinker_max_receive_count: int = Field(default=5, ge=1)
    relinker_visibility_timeout_seconds: int = Field(default=120, ge=1, le=43_200)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ENTITLEMENTS_", env_nested_delimiter="__", frozen=True, extra="ignore"
    )
    aws: AwsSettings = AwsSettings()
    policy: PolicySettings = PolicySettings()
    clock: ClockSettings = ClockSettings()
    consumer: ConsumerSettings = ConsumerSettings()
    source: SourceSettings = SourceSettings()
    array: ArraySettings = ArraySettings()
    cleanup: CleanupSettings = CleanupSettings()
    lake: LakeSettings = LakeSettings()
    bootstrap: BootstrapSettings = BootstrapSettings()
    erasure: ErasureSettings = ErasureSettings()
    service: ServiceSettings = ServiceSettings()
    metrics: MetricsSettings = MetricsSettings()


def settings_environment(settings: Settings) -> dict[str, str]:
    """The environment that rebuilds these settings in a child process (the KCL child, a worker).

    Secrets are revealed here on purpose: the environment is how a child is configured. Never log it.
    """
    env: dict[str, str] = {}
    for section_name in type(settings).model_fields:
        section = getattr(settings, section_name)
        for field_name in type(section).model_fields:
            value = getattr(section, field_name)
            if value is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            elif isinstance(value, datetime):
                value = value.isoformat()
            env[f"ENTITLEMENTS_{section_name.upper()}__{field_name.upper()}"] = str(value)
    return env


def arrow_environment(lake: LakeSettings) -> dict[str, str]:
    """The variable that gives a new process the Arrow memory pool `lake` names. It is read when
    pyarrow loads, and only it reaches every allocation: `pyarrow.set_memory_pool` in a running
    process changes pyarrow's own calls, not the Parquet writer's C++ default."""
    pool = lake.arrow_memory_pool
    return {} if pool == "default" else {"ARROW_DEFAULT_MEMORY_POOL": pool}


class SettingsError(TerminalError):
    """The settings were refused. `problems`: one line per refused field, `ENV_VARIABLE: rule`; never a
    value (the error is raised `from None`, so no chained pydantic error quotes one either)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("settings refused: " + "; ".join(self.problems))


def _variable(location: tuple[int | str, ...]) -> str:
    return "ENTITLEMENTS_" + "__".join(str(part).upper() for part in location)


def _rule(error: Any) -> str:
    """The rule a value broke: pydantic's error type, its constraints, and its message when the message
    is a fixed template (a message built around `ctx["error"]` may quote the input, so it is left out)."""
    context = {key: value for key, value in (error.get("ctx") or {}).items() if key != "error"}
    rule = str(error["type"])
    if context:
        rule += " (" + ", ".join(f"{key}={value}" for key, value in sorted(context.items())) + ")"
    if "error" not in (error.get("ctx") or {}) and error["type"] not in ("value_error", "assertion_error"):
        rule += f": {error['msg']}"
    return rule


def _problems(error: ValidationError) -> list[str]:
    return [
        f"{_variable(tuple(detail['loc']))}: {_rule(detail)}"
        for detail in error.errors(include_url=False, include_input=False)
    ]


_PREFIX = "ENTITLEMENTS_"


def known_variables() -> frozenset[str]:
    """Every variable the settings read: a section set whole as JSON (ENTITLEMENTS_AWS) or one field
    (ENTITLEMENTS_AWS__ENDPOINT_URL)."""
    names: set[str] = set()
    for section_name, field in Settings.model_fields.items():
        section = f"{_PREFIX}{section_name.upper()}"
        names.add(section)
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            names.update(f"{section}__{name.upper()}" for name in model.model_fields)
    return frozenset(names)


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """One problem per ENTITLEMENTS_* variable that names no setting, with the closest known name."""
    known = sorted(known_variables())
    # Compared without the prefix every name shares, which would make any two names look alike.
    suffixes = [name.removeprefix(_PREFIX) for name in known]
    problems = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(_PREFIX) or upper in known:
            continue
        close = difflib.get_close_matches(upper.removeprefix(_PREFIX), suffixes, n=1, cutoff=0.75)
        hint = f" (did you mean {_PREFIX}{close[0]}?)" if close else ""
        problems.append(f"{name}: unknown setting, a likely typo{hint}")
    return problems


def _unreadable(error: pydantic_settings.SettingsError) -> str:
    # 'error parsing value for field "aws" from source "EnvSettingsSource"': the field, never the value.
    field = re.search(r'field "(\w+)"', str(error))
    if field is None:
        return "a section given as JSON does not parse"
    name = field.group(1)
    return f'{_PREFIX}{name.upper()}: not a JSON object (error parsing value for field "{name}")'


def load_settings(*, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Build the settings from the environment, with explicit overrides winning. Raises `SettingsError`
    naming each refused field and its rule, never the value, and each ENTITLEMENTS_* variable that names
    no setting. `environ`: the environment checked for unknown names (default: this process's)."""
    problems = unknown_variables(os.environ if environ is None else environ)
    named = {problem.split(":", 1)[0].upper() for problem in problems}
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as refused:
        problems += [p for p in _problems(refused) if p.split(":", 1)[0] not in named]
    except pydantic_settings.SettingsError as unreadable:  # a JSON value that does not parse
        problems.append(_unreadable(unreadable))
    else:
        if not problems:
            return settings
    # Raised outside the except blocks: no frame's locals (a rich traceback shows them) hold the error.
    raise SettingsError(problems)

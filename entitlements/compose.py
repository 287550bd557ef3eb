"""The composition root: every long-lived part, built from `Settings`, in one module.

The KCL child (`entitlements.child`), the CLI commands and the demo build their parts here and nowhere
else. Building a part has no side effect on AWS: queues, topics and tables are made by the setup
commands (`entitlements table create`, `entitlements cleanup setup`, `entitlements erasure setup`),
never at each child's start; a part whose queue is missing refuses to build (`SetupMissingError`).

What the consumer's handlers are, and in which order they flush, is stated here:

- the journal (a tap for tests), when `consumer.event_journal` is set;
- the cleanup processor, which hands its outcomes to the lake (`feeds=("lake",)`): the registry flushes
  it before the lake, whatever the registration order, so its outcomes are durable before the
  checkpoint;
- the lake, dropping at landing the events of an account the erasure ledger says is erased.
"""

from __future__ import annotations

__all__ = [
    "AWS_TIMEOUTS",
    "SetupMissingError",
    "cleanup_handler",
    "drain_retry_queue",
    "erasure_worker",
    "handler_registry",
    "lake_eraser",
    "lake_handler",
    "lake_maintenance",
    "lake_worker_writer",
    "launcher",
    "lease_table_client",
    "record_decoder",
    "relink_queue",
    "relinker",
    "retry_worker",
    "service_app",
    "service_parts",
    "setup_erasure_channel",
    "setup_relink_queues",
    "setup_retry_queues",
    "shard_consumer",
    "table_stream_arn",
]

import functools
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from adapters import HttpArrayAccounts, HttpArrayClient, HttpTransactions, RetryPolicy, pooled_http
from analytics import LakeHandler, WorkerWriter, WorkerWriterClient, lake_from_settings
from config import ErasureSettings, Settings
from entitlements._clients import aws_client
from pipeline import (
    CommitPolicy,
    DeadLetters,
    Decoder,
    DroppingUsers,
    HandlerRegistry,
    HandlerRetryPolicy,
    Handover,
    ItemOrder,
    JournalHandler,
    KinesisSource,
    ParkedWork,
    Quarantine,
    ShardConsumer,
    decode_record,
)
from processors.cleanup import (
    CleanupHandler,
    DeleteValve,
    DrainReport,
    LocalDeletionNotes,
    RetryQueues,
    RetryWorker,
    ensure_retry_queues,
    flush_call_bounds,
)
from processors.erasure import (
    LEDGER_DIR_NAME,
    ConsumerStores,
    ErasureChannel,
    ErasureLedger,
    ErasureTargets,
    ErasureWorker,
    ensure_erasure_channel,
    erased_filter,
)
from schema import private_dir
from schema.aws_errors import AwsTerminalError, converted
from schema.clock import clock_from_settings
from schema.errors import TerminalError
from schema.outcomes import FlushingSink
from service import (
    SERVICE_ERRORS,
    ArrayLink,
    EntitlementService,
    EntitlementTable,
    LinkTable,
    OutcomeRecorder,
    Relinker,
    ServiceParts,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from analytics import AnalyticsLakeEraser

# The lake's eraser and maintenance (DuckDB, compaction, snapshots) are imported by the functions that
# build them: every KCL child imports this module, and those would double its start-up, which a
# restart or a lease move pays once per shard.

# Bounds for the AWS calls of the setup and repair commands (the flush's clients get `flush_call_bounds`).
AWS_TIMEOUTS: dict[str, Any] = {"connect_timeout": 2, "read_timeout": 5}
_MISSING_QUEUE = "AWS.SimpleQueueService.NonExistentQueue"


class SetupMissingError(TerminalError):
    """A part's queue, table or program does not exist: the setup command that makes it has not run, or
    the setting that points at it is wrong. Names the command or the variable."""


_MISSING_TABLE = "ResourceNotFoundException"


def table_stream_arn(settings: Settings, *, table_name: str | None = None) -> str:
    """The entitlements table's (`table_name`, default the settings') latest stream, looked up (never
    created): a missing table or stream names `entitlements table create`."""
    dynamodb = aws_client(settings.aws, "dynamodb", **AWS_TIMEOUTS)
    name = table_name or settings.consumer.table_name
    fix = "run `entitlements table create`, or set ENTITLEMENTS_CONSUMER__TABLE_NAME to the table's name"
    try:
        with converted("DynamoDB DescribeTable"):
            table = dynamodb.describe_table(TableName=name)["Table"]
    except AwsTerminalError as failed:
        if failed.code != _MISSING_TABLE:
            raise
        table = None
    if table is None:
        raise SetupMissingError(f"the entitlements table {name} does not exist: {fix}")
    arn = table.get("LatestStreamArn")
    if not isinstance(arn, str):
        raise SetupMissingError(f"the entitlements table {name} has no stream: {fix}")
    return arn


def lease_table_client(settings: Settings) -> Any:
    """The DynamoDB client `consume` reads the KCL application's lease table with (pipeline.lease_watch)."""
    return aws_client(settings.aws, "dynamodb", **AWS_TIMEOUTS)


def launcher(settings: Settings) -> tuple[str, Path]:
    """The Java program and the launcher jar the consumer runs, both checked: a missing one names its
    variable (ENTITLEMENTS_CONSUMER__JAVA, ENTITLEMENTS_CONSUMER__LAUNCHER_JAR; the jar's default is the
    installed package's, found from any folder)."""
    consumer = settings.consumer
    java = shutil.which(consumer.java)
    if java is None:
        raise SetupMissingError(
            f"java not found ({consumer.java}): install a Java 17+ runtime or set ENTITLEMENTS_CONSUMER__JAVA"
        )
    if not consumer.launcher_jar.is_file():
        raise SetupMissingError(
            f"launcher jar not found at {consumer.launcher_jar}: build it (`make setup` in the repository) "
            "or set ENTITLEMENTS_CONSUMER__LAUNCHER_JAR"
        )
    return java, consumer.launcher_jar


# -- the lake ---------------------------------------------------------------------------------------


def lake_handler(settings: Settings, *, name: str = "lake") -> DroppingUsers:
    """The lake's landing as a handler and outcome sink, dropping the events and outcomes of erased
    accounts (a replay, or a cleanup parked before the erasure). In a KCL child whose daemon runs a
    worker writer (`lake.worker_writer` set), its flushes are committed by that writer."""
    ledger = ErasureLedger.from_settings(settings)
    lake = settings.lake
    commits = (
        None
        if lake.worker_writer is None
        else WorkerWriterClient(
            lake.worker_writer,
            reply_timeout=lake.writer_reply_timeout_seconds,
            reconnect_seconds=lake.writer_reconnect_seconds,
        )
    )
    landing = LakeHandler(lake_from_settings(settings), lake, name=name, commits=commits)
    return DroppingUsers(landing, erased_filter(ledger))


def lake_worker_writer(settings: Settings) -> WorkerWriter:
    """The worker writer process's writer: the flushes of one worker's children, committed to the lake
    in one commit per table for the flushes that arrive together (docs/architecture.md)."""
    lake = settings.lake
    if lake.worker_writer is None:
        raise SetupMissingError("ENTITLEMENTS_LAKE__WORKER_WRITER must be set for the lake writer")
    return WorkerWriter(
        lake_from_settings(settings),
        lake.worker_writer,
        gather_seconds=lake.writer_gather_seconds,
        # A round per consumer commit interval: the children answered together flush together again.
        round_seconds=settings.consumer.commit_interval_seconds,
    )


def lake_maintenance(settings: Settings, *, owner: str, stop: threading.Event) -> threading.Thread | None:
    """The lake's maintenance (checkpoint cadence, compaction, vacuum, log clean-up) on a thread of
    the calling process until `stop`: `consume` runs one, and the lease in the lake elects one runner
    per lake among every consume; `owner` (the worker id) lets a restarted consume take its own lease
    back. None when `lake.maintenance_enabled` is off."""
    if not settings.lake.maintenance_enabled:
        return None
    from analytics import MaintenancePolicy, MaintenanceRunner, stable_owner  # noqa: PLC0415

    runner = MaintenanceRunner(
        lake_from_settings(settings),
        MaintenancePolicy.from_settings(settings.lake),
        owner=stable_owner(owner),
    )
    thread = threading.Thread(target=runner.run, args=(stop,), name="lake-maintenance", daemon=True)
    thread.start()
    return thread


def lake_eraser(settings: Settings) -> AnalyticsLakeEraser:
    """The lake side of an erasure (mask, purge, holdings) for the settings' lake."""
    from analytics import AnalyticsLakeEraser  # noqa: PLC0415

    return AnalyticsLakeEraser(lake_from_settings(settings))


# -- the cleanup processor --------------------------------------------------------------------------


def _retry_visibility_seconds(settings: Settings) -> int:
    return int(settings.array.retry_budget_seconds * 3) + 30


def setup_retry_queues(settings: Settings) -> RetryQueues:
    """Create (or bring up to date) the cleanup's retry queue (`settings.cleanup.retry_queue_name`) and
    its dead-letter queue: the setup command's job (`entitlements cleanup setup`), never a child's."""
    sqs = aws_client(settings.aws, "sqs", **AWS_TIMEOUTS)
    return ensure_retry_queues(
        sqs,
        settings.cleanup.retry_queue_name,
        visibility_timeout_seconds=_retry_visibility_seconds(settings),
    )


def _queue_url(sqs: Any, queue_name: str, *, what: str, setup: str) -> str:
    """A queue's URL, looked up (never created). A missing queue names the setup command that makes it."""
    try:
        with converted("SQS GetQueueUrl"):
            return str(sqs.get_queue_url(QueueName=queue_name)["QueueUrl"])
    except AwsTerminalError as failed:
        if failed.code != _MISSING_QUEUE:
            raise
    raise SetupMissingError(f"the {what} does not exist: run `{setup}` first") from None


class _CleanupClients:
    """What the stream handler and the retry worker both call: the table, the retry queue, Array."""

    def __init__(self, settings: Settings) -> None:
        # Each DynamoDB and SQS call, its retry included, ends inside the flush's time budget.
        bounds = flush_call_bounds(settings.array.retry_budget_seconds)
        self.dynamodb = aws_client(settings.aws, "dynamodb", **bounds)
        self.sqs = aws_client(settings.aws, "sqs", **bounds)
        self.array = HttpArrayClient(settings.array)
        self.queue_url = _queue_url(
            self.sqs,
            settings.cleanup.retry_queue_name,
            what="cleanup retry queue",
            setup="entitlements cleanup setup",
        )
        # Which expiries this host deleted at Array: a replay's 404 then still reports the delete.
        self.deletion_notes = LocalDeletionNotes(settings.consumer.state_dir / "cleanup-deletions")


def cleanup_handler(settings: Settings, sink: Any) -> CleanupHandler:
    """The cleanup stream handler, handing its outcomes to `sink` (the lake). Its retry queue must exist."""
    clients = _CleanupClients(settings)
    return CleanupHandler(
        dynamodb=clients.dynamodb,
        sqs=clients.sqs,
        array=clients.array,
        table_name=settings.consumer.table_name,
        retry_queue_url=clients.queue_url,
        sink=sink,
        clock=clock_from_settings(settings.clock),
        concurrency=settings.array.concurrency,
        retry_budget_seconds=settings.array.retry_budget_seconds,
        deletion_notes=clients.deletion_notes,
        valve=DeleteValve.from_settings(settings.cleanup, state_dir=settings.consumer.state_dir),
        slow_after_seconds=settings.consumer.lane_slow_after_seconds,
    )


def retry_worker(settings: Settings, lake: DroppingUsers) -> RetryWorker:
    """The retry worker, landing its outcomes in `lake` (a `lake_handler`: flushed before a message is
    acknowledged; outcomes of erased accounts, a cleanup parked before the erasure, dropped as at the
    consumer)."""
    clients = _CleanupClients(settings)
    return RetryWorker(
        # Not a flush's client: its reads must outlast the worker's long poll.
        sqs=aws_client(settings.aws, "sqs", **AWS_TIMEOUTS),
        dynamodb=clients.dynamodb,
        array=clients.array,
        table_name=settings.consumer.table_name,
        queue_url=clients.queue_url,
        sink=lake,
        clock=clock_from_settings(settings.clock),
        flush_outcomes=lake.flush,
        concurrency=settings.array.concurrency,
        retry_budget_seconds=settings.array.retry_budget_seconds,
        deletion_notes=clients.deletion_notes,
        valve=DeleteValve.from_settings(settings.cleanup, state_dir=settings.consumer.state_dir),
    )


def drain_retry_queue(
    settings: Settings,
    *,
    max_seconds: float,
    name: str = "retry-worker-lake",
) -> DrainReport:
    """Finish the parked cleanups: the retry worker's passes until its queue is empty or `max_seconds`
    ran out, their outcomes flushed to the lake before this returns."""
    landing = lake_handler(settings, name=name)
    report = retry_worker(settings, landing).drain(max_seconds=max_seconds)
    landing.flush()
    return report


# -- the stream consumer ----------------------------------------------------------------------------


def handler_registry(settings: Settings) -> HandlerRegistry:
    """The consumer's handlers. The cleanup processor declares that it feeds the lake, so the registry
    flushes it first and its outcomes are durable before the checkpoint."""
    registry = HandlerRegistry()
    if settings.consumer.event_journal is not None:
        registry.register(JournalHandler(settings.consumer.event_journal, settings.consumer.worker_id))
    lake = lake_handler(settings)
    registry.register(lake)
    registry.register(cleanup_handler(settings, sink=lake), feeds=(lake.name,))
    return registry


def record_decoder(settings: Settings) -> Decoder:
    """The decoder of the configured source (`settings.source`): a Kinesis stream's records are read
    for the configured table (docs/operations/sources.md)."""
    if settings.source.kind == "kinesis":
        return functools.partial(decode_record, kinesis=KinesisSource(settings.consumer.table_name))
    return decode_record


def shard_consumer(settings: Settings) -> ShardConsumer:
    """One shard's consumer, as the KCL child runs it: of the table's DynamoDB stream, or of the Kinesis
    stream the table streams to, each read's duplicates and per-item order resolved first."""
    consumer, source = settings.consumer, settings.source
    kinesis = source.kind == "kinesis"
    stream_arn = source.stream_arn if kinesis else consumer.stream_arn
    if stream_arn is None:
        raise SetupMissingError("ENTITLEMENTS_CONSUMER__STREAM_ARN must be set for the KCL child")
    private_dir(consumer.state_dir)  # quarantine, parked work, dead letters, stats: they hold user ids
    order: ItemOrder | Handover | None = ItemOrder(memory=source.duplicate_memory) if kinesis else None
    if source.handover_at is not None:  # a switch-over: hand on only this source's side of H
        stats = consumer.state_dir / "handover"
        at = source.handover_at
        order = Handover(at=at, keep="from" if kinesis else "before", inner=order, stats_dir=stats)
    return ShardConsumer(
        stream_arn=stream_arn,
        item_order=order,
        handlers=handler_registry(settings),
        decode=record_decoder(settings),
        quarantine=Quarantine(consumer.quarantine_dir),
        parked=ParkedWork(consumer.parked_dir),
        dead_letters=DeadLetters(consumer.dead_letter_dir),
        stats_dir=consumer.state_dir / "stats",
        commit=CommitPolicy(consumer.commit_every_records, consumer.commit_interval_seconds),
        retry=HandlerRetryPolicy(consumer.handler_retry_attempts, consumer.handler_retry_max_seconds),
    )


# -- the erasure subscriber -------------------------------------------------------------------------


def setup_erasure_channel(settings: Settings, erasure: ErasureSettings) -> ErasureChannel:
    """Create (or bring to the contract) the store's erasure queue, its dead-letter queue, the topic
    subscription and the responses queue: the setup command's job (`entitlements erasure setup`)."""
    return ensure_erasure_channel(aws_client(settings.aws, "sqs"), aws_client(settings.aws, "sns"), erasure)


def erasure_worker(settings: Settings, erasure: ErasureSettings, *, wait_seconds: int = 20) -> ErasureWorker:
    """The erasure worker as deployed: clients from the settings (read timeouts no longer than the batch
    timeout, except SQS's, which must outlast the long poll), the lake's eraser, the consumer's stores
    and the ledger under `consumer.state_dir`, the settings' clock. Its queues are looked up: `entitlements
    erasure setup` makes them."""
    batch = erasure.batch_timeout_seconds
    bounded = {"connect_timeout": batch, "read_timeout": batch}
    sqs = aws_client(settings.aws, "sqs", connect_timeout=batch, read_timeout=max(batch, wait_seconds + 5))
    from analytics import AnalyticsLakeEraser  # noqa: PLC0415

    state = private_dir(settings.consumer.state_dir)  # the ledger and the consumer's stores
    lake = lake_from_settings(settings)
    setup = "entitlements erasure setup"
    queue_url = _queue_url(sqs, erasure.queue_name, what="erasure queue", setup=setup)
    responses_url = _queue_url(sqs, erasure.responses_queue_name, what="erasure responses queue", setup=setup)
    targets = ErasureTargets(
        dynamodb=aws_client(settings.aws, "dynamodb", **bounded),
        table_name=settings.consumer.table_name,
        array=HttpArrayClient(settings.array),
        lake=AnalyticsLakeEraser(lake),
        stores=ConsumerStores.from_settings(settings.consumer),
        ledger=ErasureLedger(state / LEDGER_DIR_NAME, erasure.ledger_key),
        source=settings.source,
    )
    return ErasureWorker(
        settings=erasure,
        sqs=sqs,
        cloudwatch=aws_client(settings.aws, "cloudwatch", **bounded),
        queue_url=queue_url,
        responses_queue_url=responses_url,
        targets=targets,
        clock=clock_from_settings(settings.clock),
        outcomes=LakeHandler(lake, settings.lake, name="erasure-outcomes"),
    )


# -- the entitlements service and its relinker ------------------------------------------------------


def _service_dynamodb(settings: Settings) -> Any:
    # The service's RetryPolicy retries transient failures: botocore tries twice at most per attempt.
    timeout = settings.service.http_timeout_seconds
    return aws_client(
        settings.aws,
        "dynamodb",
        connect_timeout=timeout,
        read_timeout=timeout,
        max_pool_connections=max(settings.service.relinker_concurrency * 2, 64),
        retries={"mode": "standard", "max_attempts": 2},
    )


def service_parts(
    settings: Settings,
    *,
    sink: FlushingSink | None = None,
    link_table: LinkTable | None = None,
    http: httpx.Client | None = None,
) -> ServiceParts:
    """The service's parts: the table, Array and transactions-service clients, arraylink, and the outcome
    recorder landing in the lake through the consumer's erasure filter (`lake_handler`).

    `link_table` replaces the table arraylink reads and writes through (devstack's fault-injection
    wrapper, for `simulate` and the demo only); `http` the pooled HTTP client."""
    retry = RetryPolicy.from_settings(settings.service)
    table = EntitlementTable(_service_dynamodb(settings), settings.consumer.table_name, retry=retry)
    owned = http is None
    client = http or pooled_http(settings.service.relinker_concurrency)
    array = HttpArrayAccounts(
        settings.array, settings.service, http=client, retry=retry, errors=SERVICE_ERRORS
    )
    transactions = HttpTransactions(settings.service, http=client, retry=retry, errors=SERVICE_ERRORS)
    clock = clock_from_settings(settings.clock)
    recorder = OutcomeRecorder(sink or lake_handler(settings, name="service-outcomes"), clock)
    return ServiceParts(
        service=EntitlementService(table, array, clock, settings.policy, recorder),
        arraylink=ArrayLink(link_table or table, transactions, array),
        recorder=recorder,
        outcome_flush_seconds=settings.service.outcome_flush_seconds,
        close=client.close if owned else None,
    )


def service_app(settings: Settings, **overrides: Any) -> FastAPI:
    """The service's ASGI app (`entitlements serve`), built from `service_parts`. The web framework is
    imported here, on first use: the KCL child and the workers import this module and never serve."""
    from service import create_app  # noqa: PLC0415 (kept off the KCL child's start)

    return create_app(service_parts(settings, **overrides))


def setup_relink_queues(settings: Settings) -> RetryQueues:
    """Create (or bring up to date) the relinker's job queue and its dead-letter queue: the setup
    command's job (`entitlements relinker setup`), never the worker's."""
    sqs = aws_client(settings.aws, "sqs", **AWS_TIMEOUTS)
    return ensure_retry_queues(
        sqs,
        settings.service.relinker_queue_name,
        visibility_timeout_seconds=settings.service.relinker_visibility_timeout_seconds,
        max_receive_count=settings.service.relinker_max_receive_count,
    )


def relink_queue(settings: Settings) -> tuple[Any, str]:
    """An SQS client for the relinker's jobs (reads outlast the long poll) and the queue's URL, looked
    up (never created)."""
    sqs = aws_client(settings.aws, "sqs", connect_timeout=5, read_timeout=30, max_pool_connections=64)
    url = _queue_url(
        sqs, settings.service.relinker_queue_name, what="relink queue", setup="entitlements relinker setup"
    )
    return sqs, url


def relinker(settings: Settings, *, parts: ServiceParts | None = None, wait_seconds: int = 20) -> Relinker:
    """The relinker worker: jobs from its queue (which must exist), run through the service's arraylink
    at `service.relinker_concurrency`, outcomes landed in the lake before each job is acknowledged."""
    sqs, url = relink_queue(settings)
    parts = parts or service_parts(settings, sink=lake_handler(settings, name="relinker-outcomes"))
    return Relinker(
        sqs=sqs,
        queue_url=url,
        arraylink=parts.arraylink,
        recorder=parts.recorder,
        concurrency=settings.service.relinker_concurrency,
        wait_seconds=wait_seconds,
    )

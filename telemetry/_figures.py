"""The figures: one Prometheus series family each, and its CloudWatch EMF name and unit.

Each recording function updates the Prometheus figure (its process's registry, or the shared
multiprocess folder in a KCL child started by `entitlements consume`) and, when the process publishes
EMF (`telemetry.publish_emf`), the EMF buffer. Labels hold codes only (a handler's name, an outcome
kind, an answer type): never personal data.
"""

from __future__ import annotations

__all__ = [
    "CHECKPOINTS",
    "CLEANUP_DELETES_HELD",
    "CLEANUP_OUTCOMES",
    "DEAD_LETTERED",
    "ERASURE_ANSWERS",
    "ERASURE_NOT_APPLICABLE",
    "ERASURE_TRACES_FOUND",
    "ERASURE_UNVERIFIED",
    "FIGURES",
    "FLUSH_DURATION",
    "ITERATOR_AGE",
    "PARKED_BATCHES",
    "PARKED_RECORDS",
    "PROCESS_FIGURES",
    "QUARANTINED",
    "RECORDS",
    "RETRY_QUEUE_DEPTH",
    "SERVICE_OUTCOMES",
    "SERVICE_REQUESTS",
    "SERVICE_REQUEST_DURATION",
    "SHARD_CAUGHT_UP",
    "SHARD_RECORD_AGE",
    "STUCK_LEASES",
    "Figure",
    "ProcessKind",
    "checkpointed",
    "cleanup_delete_held",
    "cleanup_outcome",
    "dead_lettered",
    "erasure_answer",
    "erasure_not_applicable",
    "erasure_traces_found",
    "erasure_unverified",
    "flush_duration",
    "iterator_age",
    "parked",
    "process_registry",
    "quarantined",
    "records_taken",
    "retry_queue_depth",
    "service_outcome",
    "service_request",
    "shard_position",
    "stuck_leases",
]

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)
from prometheus_client.registry import Collector

from telemetry import _emf


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure: its Prometheus name (counters gain `_total` in the exposition), its EMF metric name
    and unit, the EMF dimensions its labels become (a label is the dimension's name in lower case), and
    what it counts."""

    prometheus: str
    emf: str
    unit: str
    dimensions: tuple[str, ...]
    help: str


RECORDS = Figure(
    "entitlements_consumer_records",
    "Records",
    "Count",
    (),
    "Stream records taken by the consumer's children (quarantined ones included).",
)
ITERATOR_AGE = Figure(
    "entitlements_consumer_iterator_age_seconds",
    "IteratorAge",
    "Milliseconds",
    (),
    "Age of the newest record taken (now minus its creation time): how far behind the stream the "
    "consumer is (the highest of the live children).",
)
SHARD_RECORD_AGE = Figure(
    "entitlements_consumer_shard_record_age_seconds",
    "ShardRecordAge",
    "Milliseconds",
    ("Shard",),
    "Per shard: now minus the creation time of the newest record handled, refreshed on every read, empty "
    "ones included (so it keeps rising while a shard delivers nothing); read it beside shard_caught_up.",
)
SHARD_CAUGHT_UP = Figure(
    "entitlements_consumer_shard_caught_up",
    "ShardCaughtUp",
    "None",
    ("Shard",),
    "Per shard: 1 when its last read was empty (the iterator is at the stream's end), 0 while reads "
    "bring records. A high record age with 1 is a quiet shard; with 0, a consumer behind.",
)
STUCK_LEASES = Figure(
    "entitlements_consumer_stuck_leases",
    "StuckLeases",
    "Count",
    (),
    "Leases of the application neither renewed (lease counter) nor advanced (checkpoint) for three "
    "failover times: a shard nobody reads, though its lease says otherwise (an alarm's source).",
)
QUARANTINED = Figure(
    "entitlements_consumer_quarantined_records",
    "Quarantined",
    "Count",
    (),
    "Records that could not be decoded, kept in the quarantine.",
)
DEAD_LETTERED = Figure(
    "entitlements_consumer_dead_lettered_records",
    "DeadLettered",
    "Count",
    ("Handler",),
    "Records a handler refused for their own content, kept in the dead-letter store.",
)
PARKED_RECORDS = Figure(
    "entitlements_consumer_parked_records",
    "ParkedRecords",
    "Count",
    ("Handler",),
    "Records a handler could not finish, parked for `entitlements replay-parked`.",
)
PARKED_BATCHES = Figure(
    "entitlements_consumer_parked_batches",
    "ParkedBatches",
    "Count",
    ("Handler",),
    "Parked batches (one per handler and window that could not finish).",
)
CHECKPOINTS = Figure(
    "entitlements_consumer_checkpoints",
    "Checkpoints",
    "Count",
    (),
    "Checkpoints taken (after every handler flushed or parked its window).",
)
FLUSH_DURATION = Figure(
    "entitlements_consumer_flush_duration_seconds",
    "FlushDuration",
    "Milliseconds",
    ("Handler",),
    "Time one handler's flush of a window took, its retries included.",
)
ITEM_ORDER = Figure(
    "entitlements_consumer_item_order_changes",
    "ItemOrderChanges",
    "Count",
    ("Resolution",),
    "A Kinesis source only (pipeline.item_order): changes dropped as copies (`duplicate`), changes of one "
    "item in one microsecond left in arrival order because nothing orders them (`tie`: an alarm's "
    "source), and changes handed after a later change of their item (`late`).",
)
CLEANUP_OUTCOMES = Figure(
    "entitlements_cleanup_outcomes",
    "CleanupOutcomes",
    "Count",
    ("Kind",),
    "Cleanup outcomes by kind (cleanup.deleted, cleanup.parked, ...), from the consumer and the retry "
    "worker.",
)
CLEANUP_DELETES_HELD = Figure(
    "entitlements_cleanup_deletes_held",
    "CleanupDeletesHeld",
    "Count",
    (),
    "Array deletes this process held back because its hourly delete budget "
    "(ENTITLEMENTS_CLEANUP__DELETE_BUDGET_PER_HOUR) was spent: the work was parked for the retry "
    "worker, nothing lost. Counted per process; the budget itself is per process or shared by the "
    "host's processes (ENTITLEMENTS_CLEANUP__DELETE_BUDGET_SCOPE).",
)
RETRY_QUEUE_DEPTH = Figure(
    "entitlements_cleanup_retry_queue_depth",
    "RetryQueueDepth",
    "Count",
    (),
    "Messages on the cleanup retry queue (visible, in flight and delayed), as last measured.",
)
ERASURE_NOT_APPLICABLE = Figure(
    "entitlements_erasure_not_applicable",
    "ErasureNotApplicable",
    "Count",
    (),
    "Erasure requests answered NOT_APPLICABLE (a pair or request this store does not implement).",
)
ERASURE_TRACES_FOUND = Figure(
    "entitlements_erasure_traces_found",
    "ErasureTracesFound",
    "Count",
    ("Store",),
    "Erasures whose verifier found a trace after the last pass, by store: no ACK DONE was sent, the "
    "request is left for redelivery (an alarm's source: any non-zero value).",
)
ERASURE_UNVERIFIED = Figure(
    "entitlements_erasure_unverified",
    "ErasureUnverified",
    "Count",
    ("Reason",),
    "Erasures whose last pass was not ACKed because verification did not finish, by reason: `timeout` "
    "(the batch's scans ran out of its time: every erasure of that batch is counted) or `unreadable` (a "
    "store could not be read, so the receipt cannot be clean). Each is left for redelivery.",
)
ERASURE_ANSWERS = Figure(
    "entitlements_erasure_answers",
    "ErasureAnswers",
    "Count",
    ("Answer",),
    "Erasure answers sent, by type and answer (ACK/DONE, ACK/NOT_APPLICABLE, HOLDINGS/HOLDS_NONE, ...).",
)

SERVICE_REQUESTS = Figure(
    "entitlements_service_requests",
    "ServiceRequests",
    "Count",
    ("Route", "Status"),
    "HTTP requests the service answered, by route (method and path template, never a user id) and status.",
)
SERVICE_REQUEST_DURATION = Figure(
    "entitlements_service_request_duration_seconds",
    "ServiceRequestDuration",
    "Milliseconds",
    ("Route",),
    "Time the service took to answer a request, by route.",
)
SERVICE_OUTCOMES = Figure(
    "entitlements_service_outcomes",
    "ServiceOutcomes",
    "Count",
    ("Kind",),
    "Outcomes the service recorded (links, refused retires), by kind.",
)

FIGURES: tuple[Figure, ...] = (
    RECORDS,
    ITERATOR_AGE,
    SHARD_RECORD_AGE,
    SHARD_CAUGHT_UP,
    STUCK_LEASES,
    QUARANTINED,
    DEAD_LETTERED,
    PARKED_RECORDS,
    PARKED_BATCHES,
    CHECKPOINTS,
    FLUSH_DURATION,
    ITEM_ORDER,
    CLEANUP_OUTCOMES,
    CLEANUP_DELETES_HELD,
    RETRY_QUEUE_DEPTH,
    ERASURE_NOT_APPLICABLE,
    ERASURE_TRACES_FOUND,
    ERASURE_UNVERIFIED,
    ERASURE_ANSWERS,
    SERVICE_REQUESTS,
    SERVICE_REQUEST_DURATION,
    SERVICE_OUTCOMES,
)

ProcessKind = Literal["consumer", "retry-worker", "erasure-worker", "service", "relinker"]

# What each kind of process records, and so all its endpoint serves: prometheus-client's default
# registry holds every figure declared in this module, so serving it made each endpoint carry every
# other process's series (at 0). Cleanup runs in the consumer's children and in the retry worker.
PROCESS_FIGURES: Mapping[ProcessKind, tuple[Figure, ...]] = {
    "consumer": (
        RECORDS,
        ITERATOR_AGE,
        SHARD_RECORD_AGE,
        SHARD_CAUGHT_UP,
        STUCK_LEASES,
        QUARANTINED,
        DEAD_LETTERED,
        PARKED_RECORDS,
        PARKED_BATCHES,
        CHECKPOINTS,
        FLUSH_DURATION,
        ITEM_ORDER,
        CLEANUP_OUTCOMES,
        CLEANUP_DELETES_HELD,
    ),
    "retry-worker": (CLEANUP_OUTCOMES, CLEANUP_DELETES_HELD, RETRY_QUEUE_DEPTH),
    "erasure-worker": (ERASURE_NOT_APPLICABLE, ERASURE_TRACES_FOUND, ERASURE_UNVERIFIED, ERASURE_ANSWERS),
    "service": (SERVICE_REQUESTS, SERVICE_REQUEST_DURATION, SERVICE_OUTCOMES),
    "relinker": (SERVICE_OUTCOMES,),
}


def _labels(figure: Figure) -> tuple[str, ...]:
    return tuple(dimension.lower() for dimension in figure.dimensions)


def _counter(figure: Figure) -> Counter:
    return Counter(figure.prometheus, figure.help, _labels(figure))


def _histogram(figure: Figure, buckets: tuple[float, ...]) -> Histogram:
    return Histogram(figure.prometheus, figure.help, _labels(figure), buckets=buckets)


_records = _counter(RECORDS)
# A gauge in a KCL child is written to the multiprocess folder: `livemax` shows the highest value of
# the children still alive (`consume` marks the dead ones).
_iterator_age = Gauge(ITERATOR_AGE.prometheus, ITERATOR_AGE.help, multiprocess_mode="livemax")
_shard_record_age = Gauge(
    SHARD_RECORD_AGE.prometheus, SHARD_RECORD_AGE.help, _labels(SHARD_RECORD_AGE), multiprocess_mode="livemax"
)
_shard_caught_up = Gauge(
    SHARD_CAUGHT_UP.prometheus, SHARD_CAUGHT_UP.help, _labels(SHARD_CAUGHT_UP), multiprocess_mode="livemax"
)
# Set by `entitlements consume` itself (the parent, not a child): its own registry's value.
_stuck_leases = Gauge(STUCK_LEASES.prometheus, STUCK_LEASES.help, multiprocess_mode="liveall")
_quarantined = _counter(QUARANTINED)
_dead_lettered = _counter(DEAD_LETTERED)
_parked_records = _counter(PARKED_RECORDS)
_parked_batches = _counter(PARKED_BATCHES)
_checkpoints = _counter(CHECKPOINTS)
_flush_duration = _histogram(
    FLUSH_DURATION, (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
)
_item_order = _counter(ITEM_ORDER)
_cleanup_outcomes = _counter(CLEANUP_OUTCOMES)
_retry_queue_depth = Gauge(RETRY_QUEUE_DEPTH.prometheus, RETRY_QUEUE_DEPTH.help, multiprocess_mode="livemax")
_erasure_not_applicable = _counter(ERASURE_NOT_APPLICABLE)
_erasure_answers = _counter(ERASURE_ANSWERS)
_erasure_traces_found = _counter(ERASURE_TRACES_FOUND)
_erasure_unverified = _counter(ERASURE_UNVERIFIED)
_service_requests = _counter(SERVICE_REQUESTS)
_service_request_duration = _histogram(
    SERVICE_REQUEST_DURATION, (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
)
_service_outcomes = _counter(SERVICE_OUTCOMES)
_cleanup_deletes_held = _counter(CLEANUP_DELETES_HELD)

_COLLECTORS: Mapping[Figure, Collector] = {
    RECORDS: _records,
    ITERATOR_AGE: _iterator_age,
    QUARANTINED: _quarantined,
    DEAD_LETTERED: _dead_lettered,
    PARKED_RECORDS: _parked_records,
    PARKED_BATCHES: _parked_batches,
    CHECKPOINTS: _checkpoints,
    FLUSH_DURATION: _flush_duration,
    ITEM_ORDER: _item_order,
    SHARD_RECORD_AGE: _shard_record_age,
    SHARD_CAUGHT_UP: _shard_caught_up,
    STUCK_LEASES: _stuck_leases,
    CLEANUP_OUTCOMES: _cleanup_outcomes,
    CLEANUP_DELETES_HELD: _cleanup_deletes_held,
    RETRY_QUEUE_DEPTH: _retry_queue_depth,
    ERASURE_NOT_APPLICABLE: _erasure_not_applicable,
    ERASURE_TRACES_FOUND: _erasure_traces_found,
    ERASURE_UNVERIFIED: _erasure_unverified,
    ERASURE_ANSWERS: _erasure_answers,
    SERVICE_REQUESTS: _service_requests,
    SERVICE_REQUEST_DURATION: _service_request_duration,
    SERVICE_OUTCOMES: _service_outcomes,
}


def process_registry(process: ProcessKind) -> CollectorRegistry:
    """A registry holding only `process`'s figures (PROCESS_FIGURES) and the process's own standard
    series (CPU, memory, GC, platform). The figures stay in the default registry too (one declaration,
    tests read it); a collector may sit in several registries."""
    registry = CollectorRegistry(auto_describe=True)
    for figure in PROCESS_FIGURES[process]:
        registry.register(_COLLECTORS[figure])
    for standard in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(standard)
    return registry


def records_taken(count: int) -> None:
    """A batch of `count` records taken by a shard consumer."""
    _records.inc(count)
    _emf.count(RECORDS, count)


def iterator_age(seconds: float) -> None:
    _iterator_age.set(seconds)
    _emf.gauge(ITERATOR_AGE, seconds * 1000.0)


def shard_position(shard: str, newest_record_age_seconds: float | None, caught_up: bool) -> None:
    """A read of `shard` (empty or not): the age of its newest record handled (None before the first)
    and whether the read found the stream's end."""
    if newest_record_age_seconds is not None:
        _shard_record_age.labels(shard).set(newest_record_age_seconds)
        _emf.gauge(SHARD_RECORD_AGE, newest_record_age_seconds * 1000.0, (shard,))
    _shard_caught_up.labels(shard).set(1.0 if caught_up else 0.0)
    _emf.gauge(SHARD_CAUGHT_UP, 1.0 if caught_up else 0.0, (shard,))


def stuck_leases(count: int) -> None:
    _stuck_leases.set(count)
    _emf.gauge(STUCK_LEASES, float(count))


def quarantined() -> None:
    _quarantined.inc()
    _emf.count(QUARANTINED, 1)


def dead_lettered(handler: str) -> None:
    _dead_lettered.labels(handler).inc()
    _emf.count(DEAD_LETTERED, 1, (handler,))


def parked(handler: str, records: int) -> None:
    """One batch of `records` parked for `handler`."""
    _parked_records.labels(handler).inc(records)
    _parked_batches.labels(handler).inc()
    _emf.count(PARKED_RECORDS, records, (handler,))
    _emf.count(PARKED_BATCHES, 1, (handler,))


def checkpointed() -> None:
    _checkpoints.inc()
    _emf.count(CHECKPOINTS, 1)


def flush_duration(handler: str, seconds: float) -> None:
    _flush_duration.labels(handler).observe(seconds)
    _emf.value(FLUSH_DURATION, seconds * 1000.0, (handler,))


def item_order(resolution: Literal["duplicate", "tie", "late"], changes: int) -> None:
    """`changes` of a Kinesis shard's read resolved as `resolution` (pipeline.item_order)."""
    _item_order.labels(resolution).inc(changes)
    _emf.count(ITEM_ORDER, changes, (resolution,))


def cleanup_outcome(kind: str) -> None:
    _cleanup_outcomes.labels(kind).inc()
    _emf.count(CLEANUP_OUTCOMES, 1, (kind,))


def retry_queue_depth(depth: int) -> None:
    _retry_queue_depth.set(depth)
    _emf.gauge(RETRY_QUEUE_DEPTH, float(depth))


def erasure_not_applicable(count: int) -> None:
    _erasure_not_applicable.inc(count)
    _emf.count(ERASURE_NOT_APPLICABLE, count)


def erasure_traces_found(store: str) -> None:
    """One erasure held back from ACK DONE because its verifier found a trace in `store` (a store's name:
    `table`, `lake/<table>`, `quarantine`, ...; never what the trace holds)."""
    _erasure_traces_found.labels(store).inc()
    _emf.count(ERASURE_TRACES_FOUND, 1, (store,))


def erasure_unverified(reason: Literal["timeout", "unreadable"], erasures: int) -> None:
    """`erasures` last passes left unanswered because their verification did not finish: `timeout` (their
    batch's scans ran out of its time) or `unreadable` (a store could not be read)."""
    _erasure_unverified.labels(reason).inc(erasures)
    _emf.count(ERASURE_UNVERIFIED, erasures, (reason,))


def erasure_answer(answer_type: str, answer: str) -> None:
    """One answer sent: its type (`erasure/ACK`) and what it says (`DONE`), as `ACK/DONE`."""
    label = f"{answer_type.removeprefix('erasure/')}/{answer}"
    _erasure_answers.labels(label).inc()
    _emf.count(ERASURE_ANSWERS, 1, (label,))


def service_request(route: str, status: int, seconds: float) -> None:
    """One answered request: `route` is its method and path template (`POST /{user_id}/signup`)."""
    _service_requests.labels(route, str(status)).inc()
    _service_request_duration.labels(route).observe(seconds)
    _emf.count(SERVICE_REQUESTS, 1, (route, str(status)))
    _emf.value(SERVICE_REQUEST_DURATION, seconds * 1000.0, (route,))


def service_outcome(kind: str) -> None:
    _service_outcomes.labels(kind).inc()
    _emf.count(SERVICE_OUTCOMES, 1, (kind,))


def cleanup_delete_held() -> None:
    """One Array delete held back by the hourly budget (its work parked for the retry worker)."""
    _cleanup_deletes_held.inc()
    _emf.count(CLEANUP_DELETES_HELD, 1)

"""Metrics an operator can scrape or alarm on (docs/operations/metrics.md).

Library code records figures with one call each (`records_taken`, `quarantined`, `cleanup_outcome`,
...): Prometheus series (`entitlements_*`) and, when the process publishes EMF, CloudWatch EMF
documents. Entry points choose the outputs from `config.MetricsSettings`:
- `running_metrics(...)` / `serve(...)`: a Prometheus endpoint on a loopback address for a long-running
  process, over that kind's figures only (`telemetry._figures`' `process_registry` and `PROCESS_FIGURES`);
- `ChildrenFigures`: `entitlements consume`'s endpoint over its KCL children's figures (prometheus-client's
  multiprocess mode);
- `publish_emf(...)`: EMF documents to a file or the CloudWatch agent's socket, never stdout.
`ConsumerPresence` says whether `consume` runs on a state folder (`entitlements consumer-status`).

The face is the names other packages take from `telemetry` (tests/test_faces.py holds it to them); what
only the tests use (the figures' table, the endpoint's classes) is imported from its module.
"""

from __future__ import annotations

__all__ = [
    "ChildrenFigures",
    "ConsumerPresence",
    "EmfSinkError",
    "RequestFigures",
    "checkpointed",
    "cleanup_delete_held",
    "cleanup_outcome",
    "dead_lettered",
    "erasure_answer",
    "erasure_not_applicable",
    "erasure_traces_found",
    "erasure_unverified",
    "flush_duration",
    "item_order",
    "iterator_age",
    "parked",
    "publish_emf",
    "quarantined",
    "records_taken",
    "retry_queue_depth",
    "running_metrics",
    "serve",
    "service_outcome",
    "shard_position",
    "stuck_leases",
]

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from telemetry import _emf
from telemetry._asgi import RequestFigures
from telemetry._emf import EmfPublisher, EmfSinkError
from telemetry._figures import (
    ProcessKind,
    checkpointed,
    cleanup_delete_held,
    cleanup_outcome,
    dead_lettered,
    erasure_answer,
    erasure_not_applicable,
    erasure_traces_found,
    erasure_unverified,
    flush_duration,
    item_order,
    iterator_age,
    parked,
    process_registry,
    quarantined,
    records_taken,
    retry_queue_depth,
    service_outcome,
    shard_position,
    stuck_leases,
)
from telemetry._presence import ConsumerPresence
from telemetry._prometheus import ChildrenFigures, MetricsEndpoint, serve

if TYPE_CHECKING:
    from config import MetricsSettings


def publish_emf(settings: MetricsSettings, *, process: str) -> EmfPublisher | None:
    """Start publishing this process's figures as EMF (dimension `Process` = `process`) when a sink is
    set; the publisher writes every `emf_interval_seconds` and at `close` or exit. None: no sink."""
    publisher = EmfPublisher(settings, process=process)
    if not publisher.enabled:
        return None
    _emf.install(publisher)
    return publisher.start()


@contextmanager
def running_metrics(
    settings: MetricsSettings, *, process: ProcessKind, port: int | None, variable: str
) -> Iterator[MetricsEndpoint | None]:
    """For a long-running process: its Prometheus endpoint on `port` (None: none; `variable` names the
    setting in an error), serving only `process`'s figures, and its EMF documents, both closed (a last
    EMF document written) on exit."""
    endpoint = serve(settings, port, variable=variable, registry=process_registry(process))
    try:
        publisher = publish_emf(settings, process=process)
    except BaseException:
        if endpoint is not None:
            endpoint.close()
        raise
    try:
        yield endpoint
    finally:
        if publisher is not None:
            publisher.close()
        if endpoint is not None:
            endpoint.close()

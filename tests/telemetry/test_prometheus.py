"""telemetry/_prometheus.py: a loopback endpoint per process, and `consume`'s endpoint over its
children's figures (prometheus-client's multiprocess mode)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import telemetry
from config import MetricsSettings
from telemetry._figures import PROCESS_FIGURES, ProcessKind, process_registry, service_request
from telemetry._prometheus import MetricsEndpoint, MetricsEndpointError
from tests.telemetry._scrape import free_port, scrape

KINDS: tuple[ProcessKind, ...] = (
    "consumer",
    "retry-worker",
    "erasure-worker",
    "service",
    "relinker",
)

CHILD = """
import telemetry
telemetry.records_taken(3)
telemetry.iterator_age(2.0)
telemetry.cleanup_outcome("cleanup.deleted")
"""


@pytest.fixture
def endpoint() -> Iterator[MetricsEndpoint]:
    served = telemetry.serve(
        MetricsSettings(),
        free_port(),
        variable="ENTITLEMENTS_METRICS__ERASURE_WORKER_PORT",
        registry=process_registry("erasure-worker"),
    )
    assert served is not None
    yield served
    served.close()


def test_an_endpoint_on_loopback_serves_the_processs_figures(endpoint: MetricsEndpoint) -> None:
    before = scrape(endpoint.url).get(("entitlements_erasure_not_applicable_total", ()), 0.0)
    telemetry.erasure_not_applicable(2)
    assert endpoint.url.startswith("http://127.0.0.1:")
    assert scrape(endpoint.url)[("entitlements_erasure_not_applicable_total", ())] == before + 2


def test_a_port_in_use_is_refused_naming_the_address_and_the_setting(
    endpoint: MetricsEndpoint,
) -> None:
    port = int(endpoint.url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(MetricsEndpointError) as refused:
        telemetry.serve(
            MetricsSettings(),
            port,
            variable="ENTITLEMENTS_METRICS__CONSUME_PORT",
            registry=process_registry("consumer"),
        )
    assert f"127.0.0.1:{port}" in str(refused.value)
    assert "ENTITLEMENTS_METRICS__CONSUME_PORT" in str(refused.value)


def test_no_port_serves_nothing() -> None:
    assert (
        telemetry.serve(
            MetricsSettings(),
            None,
            variable="ENTITLEMENTS_METRICS__SERVICE_PORT",
            registry=process_registry("service"),
        )
        is None
    )


def families(url: str) -> set[str]:
    """The names of the project's figure families an endpoint serves (a counter's `_created` samples,
    which the text parser reads as a family of their own, folded into their counter)."""
    text = httpx.get(url, timeout=10).text
    return {
        family.name.removesuffix("_created")
        for family in text_string_to_metric_families(text)
        if family.name.startswith("entitlements_")
    }


def record_every_figure() -> None:
    telemetry.records_taken(1)
    telemetry.iterator_age(1.0)
    telemetry.quarantined()
    telemetry.dead_lettered("registry-test")
    telemetry.parked("registry-test", 1)
    telemetry.checkpointed()
    telemetry.flush_duration("registry-test", 0.1)
    telemetry.cleanup_outcome("cleanup.deleted")
    telemetry.cleanup_delete_held()
    telemetry.retry_queue_depth(1)
    telemetry.erasure_not_applicable(1)
    telemetry.erasure_traces_found("table")
    telemetry.erasure_answer("erasure/ACK", "DONE")
    service_request("GET /health", 200, 0.01)
    telemetry.service_outcome("link.done")


@pytest.mark.parametrize("kind", KINDS)
def test_each_process_kinds_endpoint_serves_its_own_figures_and_none_of_the_others(
    kind: ProcessKind,
) -> None:
    record_every_figure()
    with telemetry.running_metrics(
        MetricsSettings(), process=kind, port=free_port(), variable="ENTITLEMENTS_METRICS__SERVICE_PORT"
    ) as endpoint:
        assert endpoint is not None
        served = families(endpoint.url)
    assert served == {figure.prometheus for figure in PROCESS_FIGURES[kind]}


def test_the_erasure_workers_endpoint_carries_no_consumer_series() -> None:
    telemetry.records_taken(1)
    with telemetry.running_metrics(
        MetricsSettings(),
        process="erasure-worker",
        port=free_port(),
        variable="ENTITLEMENTS_METRICS__ERASURE_WORKER_PORT",
    ) as endpoint:
        assert endpoint is not None
        served = families(endpoint.url)
    assert not {name for name in served if name.startswith("entitlements_consumer_")}


def children_figures(folder: Path, children: int) -> telemetry.ChildrenFigures:
    figures = telemetry.ChildrenFigures(folder, running=lambda: True, starts=lambda: 1)
    for _ in range(children):
        subprocess.run(
            [sys.executable, "-c", CHILD], env={**os.environ, **figures.environment()}, check=True, timeout=60
        )
    return figures


def test_the_children_counters_are_summed_and_an_exited_childs_gauge_is_dropped(tmp_path: Path) -> None:
    figures = children_figures(tmp_path / "metrics", children=2)
    port = free_port()
    served = telemetry.serve(
        MetricsSettings(), port, variable="ENTITLEMENTS_METRICS__CONSUME_PORT", registry=figures.registry()
    )
    assert served is not None
    try:
        samples = scrape(served.url)
    finally:
        served.close()
    assert samples[("entitlements_consumer_records_total", ())] == 6
    assert samples[("entitlements_cleanup_outcomes_total", (("kind", "cleanup.deleted"),))] == 2
    assert samples[("entitlements_consumer_daemon_running", ())] == 1
    assert not [name for name, _labels in samples if name == "entitlements_consumer_iterator_age_seconds"]


def test_the_consumers_endpoint_serves_no_figure_of_another_process_its_children_imported(
    tmp_path: Path,
) -> None:
    # A child's files hold every unlabelled figure it imported, at 0 (the erasure and retry ones too).
    figures = children_figures(tmp_path / "metrics", children=1)
    served = telemetry.serve(
        MetricsSettings(),
        free_port(),
        variable="ENTITLEMENTS_METRICS__CONSUME_PORT",
        registry=figures.registry(),
    )
    assert served is not None
    try:
        names = families(served.url)
    finally:
        served.close()
    consumer = {figure.prometheus for figure in PROCESS_FIGURES["consumer"]}
    assert names - consumer == {"entitlements_consumer_daemon_running", "entitlements_consumer_daemon_starts"}


def test_a_new_consumer_run_starts_from_an_empty_folder(tmp_path: Path) -> None:
    children_figures(tmp_path / "metrics", children=1)
    again = telemetry.ChildrenFigures(tmp_path / "metrics", running=lambda: False, starts=lambda: 0)
    assert list(again.folder.glob("*.db")) == []

"""telemetry/_prometheus.py: a loopback endpoint per process, and `consume`'s endpoint over its
children's figures (prometheus-client's multiprocess mode)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import telemetry
from config import MetricsSettings
from tests.telemetry._scrape import free_port, scrape

CHILD = """
import telemetry
telemetry.records_taken(3)
telemetry.iterator_age(2.0)
telemetry.cleanup_outcome("cleanup.deleted")
"""


@pytest.fixture
def endpoint() -> Iterator[telemetry.MetricsEndpoint]:
    served = telemetry.serve(MetricsSettings(), free_port(), variable="ENTITLEMENTS_METRICS__SERVICE_PORT")
    assert served is not None
    yield served
    served.close()


def test_an_endpoint_on_loopback_serves_the_processs_figures(endpoint: telemetry.MetricsEndpoint) -> None:
    before = scrape(endpoint.url).get(("entitlements_erasure_not_applicable_total", ()), 0.0)
    telemetry.erasure_not_applicable(2)
    assert endpoint.url.startswith("http://127.0.0.1:")
    assert scrape(endpoint.url)[("entitlements_erasure_not_applicable_total", ())] == before + 2


def test_a_port_in_use_is_refused_naming_the_address_and_the_setting(
    endpoint: telemetry.MetricsEndpoint,
) -> None:
    port = int(endpoint.url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(telemetry.MetricsEndpointError) as refused:
        telemetry.serve(MetricsSettings(), port, variable="ENTITLEMENTS_METRICS__CONSUME_PORT")
    assert f"127.0.0.1:{port}" in str(refused.value)
    assert "ENTITLEMENTS_METRICS__CONSUME_PORT" in str(refused.value)


def test_no_port_serves_nothing() -> None:
    assert telemetry.serve(MetricsSettings(), None, variable="ENTITLEMENTS_METRICS__SERVICE_PORT") is None


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


def test_a_new_consumer_run_starts_from_an_empty_folder(tmp_path: Path) -> None:
    children_figures(tmp_path / "metrics", children=1)
    again = telemetry.ChildrenFigures(tmp_path / "metrics", running=lambda: False, starts=lambda: 0)
    assert list(again.folder.glob("*.db")) == []

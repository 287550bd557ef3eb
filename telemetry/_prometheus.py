"""The Prometheus endpoints: one per long-running process, on a loopback address and a configured port.

A single process (the retry worker, the erasure worker, the service, the relinker) serves a registry
holding only its own figures (`telemetry._figures.process_registry`).
`entitlements consume` serves its KCL children's figures: it starts the daemon with
`PROMETHEUS_MULTIPROC_DIR` set (prometheus-client's multiprocess mode: each child writes its figures to
files in that folder), and its endpoint reads them all (`MultiProcessCollector`), after marking the
children that have exited (their counters stay counted; their gauges leave the `livemax` view).
"""

from __future__ import annotations

__all__ = ["ChildrenFigures", "MetricsEndpoint", "MetricsEndpointError", "serve"]

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from schema.errors import TerminalError
from telemetry._figures import PROCESS_FIGURES, _stuck_leases

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from config import MetricsSettings

_PID = re.compile(r"_(\d+)\.db$")
# A child writes every unlabelled figure it imports (at 0) to its files: only the consumer's are served.
_CONSUMER_FAMILIES = frozenset(figure.prometheus for figure in PROCESS_FIGURES["consumer"])


class MetricsEndpointError(TerminalError):
    """The endpoint could not be opened: the message names the address, the setting and the way out."""


class MetricsEndpoint:
    """A running endpoint; `url` is where to scrape it, `close` stops it."""

    def __init__(self, server: WSGIServer, host: str, port: int) -> None:
        self._server = server
        self.url = f"http://{host}:{port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve(
    settings: MetricsSettings,
    port: int | None,
    *,
    variable: str,
    registry: CollectorRegistry,
) -> MetricsEndpoint | None:
    """Serve `registry` (`process_registry(kind)`, or `ChildrenFigures.registry()`) on
    `settings.host`:`port` (None: no endpoint). `variable` is the setting that names the port, for the
    error line."""
    if port is None:
        return None
    try:
        server, _thread = start_http_server(port, addr=settings.host, registry=registry)
    except OSError as error:
        raise MetricsEndpointError(
            f"metrics endpoint {settings.host}:{port} cannot be opened ({error.strerror}): "
            f"set {variable} to a free port, or stop the process holding it"
        ) from None
    return MetricsEndpoint(server, settings.host, port)


class ChildrenFigures(Collector):
    """The KCL children's figures, read from their multiprocess folder, plus the parent's own: whether
    the daemon is running and how often it was started."""

    def __init__(self, folder: Path, *, running: Callable[[], bool], starts: Callable[[], int]) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.db"):  # a previous run's children: the library wants a clean folder
            stale.unlink()
        self._children = MultiProcessCollector(None, path=str(folder))  # type: ignore[no-untyped-call]
        self._running = running
        self._starts = starts

    def environment(self) -> dict[str, str]:
        """What the daemon's environment needs so that its children write their figures here."""
        return {"PROMETHEUS_MULTIPROC_DIR": str(self.folder)}

    def registry(self) -> CollectorRegistry:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        return registry

    def collect(self) -> Iterable[Metric]:
        self._mark_exited()
        for family in self._children.collect():  # type: ignore[no-untyped-call]
            if family.name in _CONSUMER_FAMILIES:
                yield family
        running = GaugeMetricFamily(
            "entitlements_consumer_daemon_running", "1 while the KCL daemon (the Java launcher) runs."
        )
        running.add_metric([], 1.0 if self._running() else 0.0)
        yield running
        starts = CounterMetricFamily(
            "entitlements_consumer_daemon_starts", "KCL daemon starts by `entitlements consume`."
        )
        starts.add_metric([], float(self._starts()))
        yield starts
        # Set by `consume` itself (pipeline.lease_watch), not by a child: this process's own gauge.
        yield from _stuck_leases.collect()

    def _mark_exited(self) -> None:
        pids = {int(match.group(1)) for path in self.folder.glob("*.db") if (match := _PID.search(path.name))}
        for pid in pids:
            if not _alive(pid):
                mark_process_dead(pid, str(self.folder))  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

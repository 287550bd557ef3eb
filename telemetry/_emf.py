"""CloudWatch Embedded Metric Format: the figures of one process, every interval, to a file or a socket.

Each document is built by Powertools' EMF provider (`AmazonCloudWatchEMFProvider.serialize_metric_set`,
the format Powertools writes) and written as one JSON line to the sinks: a file (appended; the
CloudWatch agent tails it) and/or the CloudWatch agent's EMF socket (`udp://` or `tcp://`). Never to
stdout: in a KCL child stdout is the protocol channel. Powertools' own printing path (`flush_metrics`,
and `add_metric` at its 100-value limit) is never reached: a document is given at most 99 values.

A document per dimension set: `Process` always, plus the figure's own (`Handler`, `Kind`, `Answer`,
`Route` and `Status`).
Counters carry what happened since the previous document (0 once a figure has been seen, so an alarm
sees a steady series), gauges their last value, durations every value observed.
"""

from __future__ import annotations

__all__ = ["EmfPublisher", "count", "gauge", "value"]

import atexit
import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from schema.errors import TerminalError

if TYPE_CHECKING:
    from config import MetricsSettings
    from telemetry._figures import Figure

logger = logging.getLogger(__name__)

# Powertools prints a document to stdout when one metric reaches 100 values: stay below it.
_MAX_VALUES = 99

_Key = tuple["Figure", tuple[str, ...]]


class EmfSinkError(TerminalError):
    """An EMF sink could not be opened: the message names the setting and the way out."""


@dataclass
class _Buffer:
    counts: dict[_Key, float]
    gauges: dict[_Key, float]
    values: dict[_Key, list[float]]


class _Sink:
    def write(self, line: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Nothing held by default."""


class _FileSink(_Sink):
    """Appended one line per `os.write`, so the lines of several processes sharing it never interleave."""

    def __init__(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as error:
            raise EmfSinkError(
                f"EMF file {path} cannot be opened ({error.strerror}): "
                "set ENTITLEMENTS_METRICS__EMF_FILE to a writable path"
            ) from None

    def write(self, line: bytes) -> None:
        try:
            os.write(self._fd, line + b"\n")
        except OSError as error:  # a full disk: the document is dropped, the process goes on
            logger.warning("EMF document not written", extra={"error": type(error).__name__})

    def close(self) -> None:
        os.close(self._fd)


class _SocketSink(_Sink):
    """The CloudWatch agent's EMF listener. A document that cannot be sent is dropped (and counted in a
    log line): metrics never stop the process."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._tcp = parts.scheme == "tcp"
        self._address = (parts.hostname or "127.0.0.1", parts.port or 25888)
        self._socket: socket.socket | None = None

    def _connected(self) -> socket.socket:
        if self._socket is None:
            if self._tcp:
                self._socket = socket.create_connection(self._address, timeout=2.0)
            else:
                self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        return self._socket

    def write(self, line: bytes) -> None:
        try:
            connection = self._connected()
            if self._tcp:
                connection.sendall(line + b"\n")
            else:
                connection.sendto(line + b"\n", self._address)
        except OSError as error:
            self.close()
            logger.warning("EMF document not sent", extra={"error": type(error).__name__})

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


class EmfPublisher:
    """Collects the process's figures and writes them as EMF documents every `interval` seconds (a
    daemon thread) and once more at `close` (or at the interpreter's exit)."""

    def __init__(
        self, settings: MetricsSettings, *, process: str, clock_ms: Callable[[], int] | None = None
    ) -> None:
        self._namespace = settings.emf_namespace
        self._process = process
        self._interval = settings.emf_interval_seconds
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._buffer = _Buffer({}, {}, {})
        self._sinks: list[_Sink] = []
        if settings.emf_file is not None:
            self._sinks.append(_FileSink(settings.emf_file))
        if settings.emf_socket is not None:
            self._sinks.append(_SocketSink(settings.emf_socket))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return bool(self._sinks)

    def start(self) -> EmfPublisher:
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="emf-publisher", daemon=True)
            self._thread.start()
            atexit.register(self.close)
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        self.publish()
        for sink in self._sinks:
            sink.close()
        self._sinks = []
        atexit.unregister(self.close)
        if _publisher is self:
            install(None)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.publish()
            except Exception as error:  # metrics never stop the process, nor their own thread
                logger.warning("EMF documents not published", extra={"error": type(error).__name__})

    # -- recording ---------------------------------------------------------------------------------

    def count(self, figure: Figure, amount: float, labels: tuple[str, ...]) -> None:
        with self._lock:
            counts = self._buffer.counts
            counts[figure, labels] = counts.get((figure, labels), 0.0) + amount

    def gauge(self, figure: Figure, amount: float, labels: tuple[str, ...]) -> None:
        with self._lock:
            self._buffer.gauges[figure, labels] = amount

    def value(self, figure: Figure, amount: float, labels: tuple[str, ...]) -> None:
        with self._lock:
            self._buffer.values.setdefault((figure, labels), []).append(amount)

    # -- publishing --------------------------------------------------------------------------------

    def publish(self) -> int:
        """Write one EMF document per dimension set holding anything; returns how many were written."""
        if not self._sinks:
            return 0
        with self._lock:
            counts = dict(self._buffer.counts)
            gauges = dict(self._buffer.gauges)
            values = self._buffer.values
            self._buffer.counts = dict.fromkeys(counts, 0.0)
            self._buffer.values = {}
        written = 0
        for document in self.documents(counts, gauges, values):
            line = json.dumps(document, separators=(",", ":")).encode()
            for sink in self._sinks:
                sink.write(line)
            written += 1
        return written

    def documents(
        self,
        counts: dict[_Key, float],
        gauges: dict[_Key, float],
        values: dict[_Key, list[float]],
    ) -> Iterator[dict[str, Any]]:
        # Deferred: only a process that publishes EMF imports Powertools.
        from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (  # noqa: PLC0415
            AmazonCloudWatchEMFProvider,
        )

        groups: dict[tuple[tuple[str, str], ...], list[tuple[Figure, list[float]]]] = {}
        for (figure, labels), amount in [*counts.items(), *gauges.items()]:
            dimensions = tuple(zip(figure.dimensions, labels, strict=True))
            groups.setdefault(dimensions, []).append((figure, [amount]))
        for (figure, labels), observed in values.items():
            dimensions = tuple(zip(figure.dimensions, labels, strict=True))
            groups.setdefault(dimensions, []).append((figure, observed))
        for dimensions, members in groups.items():
            for chunk in _chunks(members):
                provider = AmazonCloudWatchEMFProvider(namespace=self._namespace)
                provider.add_dimension(name="Process", value=self._process)
                for name, label in dimensions:
                    provider.add_dimension(name=name, value=label)
                if self._clock_ms is not None:
                    provider.set_timestamp(self._clock_ms())
                for figure, amounts in chunk:
                    for amount in amounts:
                        provider.add_metric(name=figure.emf, unit=figure.unit, value=amount)
                yield dict(provider.serialize_metric_set())


def _chunks(members: list[tuple[Figure, list[float]]]) -> Iterator[list[tuple[Figure, list[float]]]]:
    """The members split so that no document gives one metric more than `_MAX_VALUES` values."""
    rest = members
    while rest:
        chunk = [(figure, amounts[:_MAX_VALUES]) for figure, amounts in rest]
        yield chunk
        rest = [(figure, amounts[_MAX_VALUES:]) for figure, amounts in rest if len(amounts) > _MAX_VALUES]


# The process's publisher, once `telemetry.publish_emf` started one.
_publisher: EmfPublisher | None = None


def install(publisher: EmfPublisher | None) -> None:
    global _publisher  # noqa: PLW0603 (the process's one publisher)
    _publisher = publisher


def count(figure: Figure, amount: float, labels: tuple[str, ...] = ()) -> None:
    if _publisher is not None:
        _publisher.count(figure, amount, labels)


def gauge(figure: Figure, amount: float, labels: tuple[str, ...] = ()) -> None:
    if _publisher is not None:
        _publisher.gauge(figure, amount, labels)


def value(figure: Figure, amount: float, labels: tuple[str, ...] = ()) -> None:
    if _publisher is not None:
        _publisher.value(figure, amount, labels)

"""The real KCL child (`entitlements.child.main`) with the composition's handlers registered in another
order, each with the sinks the composition declared for it (`feeds`). `KCL_TEST_HANDLER_ORDER` picks it:
`producers-first` registers each producer before the sinks it feeds, `sinks-first` the reverse. The
child logs the order it registered and the order the registry flushes in (handler names only).

`start_reordered_worker` starts a daemon of a `RunningConsumer` whose children are this module."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys

from config import Settings
from entitlements import child, compose
from pipeline.daemon import DaemonSpec, KclDaemon, launcher_properties
from pipeline.handlers import HandlerRegistry
from schema import write_private_file
from tests.support.kcl import REPO, RunningConsumer

ORDER_VARIABLE = "KCL_TEST_HANDLER_ORDER"
ORDERS = ("producers-first", "sinks-first")

logger = logging.getLogger(__name__)
_composed_registry = compose.handler_registry


def reordered_registry(settings: Settings) -> HandlerRegistry:
    composed = _composed_registry(settings)
    handlers = list(composed.ordered())  # producers before their sinks
    order = os.environ[ORDER_VARIABLE]
    if order not in ORDERS:
        raise ValueError(f"{ORDER_VARIABLE} must be one of {ORDERS}")
    if order == "sinks-first":
        handlers.reverse()
    registry = HandlerRegistry()
    for handler in handlers:
        registry.register(handler, feeds=composed.feeds(handler.name))
    logger.info(
        "handlers registered",
        extra={
            "registered": [handler.name for handler in handlers],
            "flushed": [handler.name for handler in registry.ordered()],
        },
    )
    return registry


def start_reordered_worker(consumer: RunningConsumer, order: str, worker_id: str = "worker-1") -> KclDaemon:
    settings = consumer.settings
    spec = DaemonSpec.from_settings(
        settings,
        stream_arn=consumer.stream_arn,
        worker_id=worker_id,
        work_dir=settings.consumer.state_dir / "daemon",
    )
    properties = launcher_properties(
        settings,
        stream_arn=consumer.stream_arn,
        worker_id=worker_id,
        child_command=f"{sys.executable} -m tests.support.reordered_child",
    )
    write_private_file(spec.properties_path, properties.encode())
    environment = {**spec.environment, ORDER_VARIABLE: order, "PYTHONPATH": str(REPO)}
    daemon = KclDaemon(dataclasses.replace(spec, environment=environment))
    daemon.start()
    consumer.daemons[worker_id] = daemon
    return daemon


if __name__ == "__main__":
    compose.handler_registry = reordered_registry
    child.main()

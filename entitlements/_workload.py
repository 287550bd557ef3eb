"""The service run in this process for `entitlements simulate --clients N` and the demo.

    with local_service(settings, unguarded_links=False) as running:
        run_service_workload(config, running.url)

The service is the real composition (`entitlements.compose.service_parts`) served by uvicorn on
127.0.0.1 (`devstack.service_runner`). With `unguarded_links=True` arraylink's write-back is devstack's
fault-injection wrapper (`devstack.unguarded_links`: an unconditional put instead of SaveIfActive),
refused unless every endpoint in the settings is loopback. `entitlements serve` never takes it.
"""

from __future__ import annotations

__all__ = ["RunningService", "local_service"]

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from config import Settings
from devstack.service_runner import InProcessService
from devstack.unguarded_links import UnguardedLinkTable, assert_all_loopback, unguarded_link_table
from entitlements import compose
from entitlements._clients import aws_client
from service.app import create_app
from service.dynamo import EntitlementTable


@dataclass(frozen=True)
class RunningService:
    url: str
    unguarded: UnguardedLinkTable | None  # its counts are the service's count of overwritten rows


@contextmanager
def local_service(
    settings: Settings, *, unguarded_links: bool = False, sink: Any = None, port: int = 0
) -> Iterator[RunningService]:
    """Serve the service on 127.0.0.1 (`port`; 0 a free one) until the block ends; its outcomes land in
    the lake (or `sink`) and are flushed at the end."""
    assert_all_loopback(settings, purpose="the in-process service is for the local stack only")
    wrapper: UnguardedLinkTable | None = None
    overrides: dict[str, Any] = {}
    if sink is not None:
        overrides["sink"] = sink
    if unguarded_links:
        dynamodb = aws_client(settings.aws, "dynamodb")
        reader = EntitlementTable(dynamodb, settings.consumer.table_name)
        wrapper = unguarded_link_table(settings, reader, dynamodb)
        overrides["link_table"] = wrapper
    app = create_app(compose.service_parts(settings, **overrides))
    with InProcessService(app, port=port) as service:
        yield RunningService(service.url, wrapper)

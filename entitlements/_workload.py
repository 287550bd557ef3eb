"""The service run in this process for `entitlements simulate --clients N` and the demo.

    with local_service(settings, unguarded_links=False) as running:
        run_service_workload(config, running.url)

The service is the real composition (`entitlements.compose.service_parts`) served by uvicorn on
127.0.0.1 (`devstack.service_runner`). With `unguarded_links=True` arraylink's write-back is devstack's
fault-injection wrapper (`devstack.unguarded_links`: an unconditional put instead of SaveIfActive),
refused unless every endpoint in the settings is loopback. `entitlements serve` never takes it.
"""

from __future__ import annotations

__all__ = ["RunningService", "ServiceOperations", "in_process_service", "local_service"]

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from config import Settings
from devstack.service_runner import InProcessService
from devstack.unguarded_links import UnguardedLinkTable, assert_all_loopback, unguarded_link_table
from devstack.workload import Answered, OperationAnswer
from entitlements import compose
from entitlements._clients import aws_client
from schema.errors import EntitlementsError, RetryableError
from service import (
    ConcurrentRequestError,
    EntitlementNotActiveError,
    EntitlementTable,
    ServiceParts,
    ServiceRefusal,
    create_app,
    link_and_record,
)


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


def _answer(error: EntitlementsError) -> OperationAnswer:
    if isinstance(error, EntitlementNotActiveError):
        return OperationAnswer.NOT_ACTIVE
    if isinstance(error, ConcurrentRequestError):
        return OperationAnswer.CONCURRENT
    if isinstance(error, ServiceRefusal):
        return OperationAnswer.REFUSED
    if isinstance(error, RetryableError):
        return OperationAnswer.UNAVAILABLE
    raise error  # a terminal failure that is no refusal (a table refusing us): the run stops


class ServiceOperations:
    """`devstack.workload.EntitlementOperations` over the service's own parts, in this process: the
    routes' calls without HTTP (a link records its outcome as the processor route does)."""

    def __init__(self, parts: ServiceParts) -> None:
        self._parts = parts

    @staticmethod
    def _call(write: Callable[[], str]) -> Answered:
        try:
            return Answered(OperationAnswer.DONE, write())
        except EntitlementsError as failed:
            return Answered(_answer(failed))

    def signup(self, user_id: str) -> Answered:
        return self._call(lambda: self._parts.service.signup(user_id).array_account_id)

    def cancel(self, user_id: str) -> Answered:
        return self._call(lambda: self._parts.service.cancel(user_id))

    def reactivate(self, user_id: str) -> Answered:
        return self._call(lambda: self._parts.service.reactivate(user_id))

    def second_signup(self, user_id: str) -> Answered:
        return self._call(lambda: self._parts.service.second_signup(user_id).array_account_id)

    def relink(self, user_id: str) -> Answered:
        parts = self._parts
        attempt = link_and_record(parts.arraylink, parts.recorder, user_id, job_id=uuid.uuid4().hex)
        if attempt.error is not None:
            return Answered(_answer(attempt.error))
        return Answered(OperationAnswer.DONE, attempt.array_account_id)


@contextmanager
def in_process_service(settings: Settings, *, sink: Any = None) -> Iterator[ServiceOperations]:
    """The service's parts (`entitlements.compose.service_parts`) handed to the simulator as its
    `EntitlementOperations`; their outcomes land in the lake (or `sink`), flushed when the block ends."""
    assert_all_loopback(settings, purpose="the in-process service is for the local stack only")
    parts = compose.service_parts(settings, **({"sink": sink} if sink is not None else {}))
    try:
        yield ServiceOperations(parts)
    finally:
        parts.recorder.flush()
        if parts.close is not None:
            parts.close()

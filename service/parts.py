"""What the service's HTTP app and the relinker serve with, built by the composition root
(`entitlements.compose.service_parts`). Kept apart from `service.app` so that building the parts (the
relinker, a KCL child importing the composition root) never imports the web framework."""

from __future__ import annotations

__all__ = ["ServiceParts"]

from collections.abc import Callable
from dataclasses import dataclass

from service.arraylink import ArrayLink
from service.idempotency import Idempotency
from service.outcomes import OutcomeRecorder
from service.writes import EntitlementService


@dataclass
class ServiceParts:
    service: EntitlementService
    arraylink: ArrayLink
    recorder: OutcomeRecorder
    outcome_flush_seconds: float = 2.0
    close: Callable[[], None] | None = None
    # The Idempotency-Key records; None: built on the service's own table and clock by `create_app`.
    idempotency: Idempotency | None = None

"""The service's outcome events (`schema.outcomes`): what a link or a refused retire came to.

A link writes no stream record when it succeeds (its put changes nothing), so these outcomes are its
record; they reach the lake through the sink the composition root hands over (the same erasure filter
as the consumer's outcomes). An outcome holds the user and account ids (so an erasure can purge it) and a
short code; never a processor token.
"""

from __future__ import annotations

__all__ = ["OutcomeRecorder", "link_outcome"]

import logging
import threading
from datetime import datetime

import telemetry
from schema.clock import Clock
from schema.outcomes import FlushingSink, OutcomeEvent, OutcomeKind, outcome_id

logger = logging.getLogger(__name__)


def link_outcome(
    kind: OutcomeKind,
    *,
    job_id: str,
    user_id: str,
    array_account_id: str | None,
    occurred_at: datetime,
    attempt: int = 0,
    detail: str | None = None,
) -> OutcomeEvent:
    """One outcome of the link job or request `job_id` (its identity: job, kind, attempt)."""
    return OutcomeEvent(
        outcome_id=outcome_id(job_id, kind, attempt),
        kind=kind,
        occurred_at=occurred_at,
        user_id=user_id,
        array_account_id=array_account_id,
        attempt=attempt,
        detail=detail,
    )


class OutcomeRecorder:
    """Buffers outcomes and counts them by kind (the counts are safe to show: no personal data);
    `flush` hands the buffered outcomes to the sink and flushes it. Recording never waits for a lake
    write: request and job threads only append under a short lock."""

    def __init__(self, sink: FlushingSink, clock: Clock) -> None:
        self._sink = sink
        self._clock = clock
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._buffer: list[OutcomeEvent] = []
        self.counts: dict[str, int] = {}
        # By kind and detail ("link.not_active:save_refused": the links SaveIfActive refused).
        self.detail_counts: dict[str, int] = {}

    def now(self) -> datetime:
        return self._clock.now()

    @property
    def pending(self) -> int:
        """Outcomes recorded and not yet handed to the sink."""
        with self._lock:
            return len(self._buffer)

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        """The counts by kind and by kind and detail, copied under the lock."""
        with self._lock:
            return dict(self.counts), dict(self.detail_counts)

    def record(self, outcome: OutcomeEvent) -> None:
        with self._lock:
            self._buffer.append(outcome)
            self.counts[outcome.kind.value] = self.counts.get(outcome.kind.value, 0) + 1
            telemetry.service_outcome(outcome.kind.value)
            if outcome.detail is not None:
                key = f"{outcome.kind.value}:{outcome.detail}"
                self.detail_counts[key] = self.detail_counts.get(key, 0) + 1

    def flush(self) -> None:
        """Every outcome recorded before this call is durable when it returns (or it raises, and they
        stay buffered for the next flush)."""
        with self._flush_lock:
            with self._lock:
                pending, self._buffer = self._buffer, []
            try:
                for outcome in pending:
                    self._sink.add_outcome(outcome)
                self._sink.flush()
            except BaseException:
                with self._lock:  # the sink keeps what it took; a repeat lands once (outcome ids)
                    self._buffer[:0] = pending
                raise

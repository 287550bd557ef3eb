"""Stream records and consumer stores for the store commands' tests, under one state directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from entitlements import compose
from pipeline.dead_letter import DeadLetters
from pipeline.handlers import HandlerRegistry
from pipeline.parking import ParkedWork
from pipeline.quarantine import Quarantine
from tests.pipeline._consumer_fakes import STREAM
from tests.support.stream_records import insert


def stream_record(event_id: str, seq: str = "100", user: str = "u1") -> bytes:
    """An entitlement's INSERT as the adapter delivers it; an id starting `poison` is refused by the
    tests' `Recorder` handlers."""
    row = {
        "pk": {"S": f"USER#{user}"},
        "sk": {"S": "ENTITLEMENT#a1"},
        "userId": {"S": user},
        "arrayAccountId": {"S": "a1"},
        "status": {"S": "Active"},
    }
    return insert(row, event_id=event_id, sequence_number=seq, created_at_ms=1796033513579)


class StateDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.quarantine = Quarantine(root / "quarantine")
        self.parked = ParkedWork(root / "parked")
        self.dead_letters = DeadLetters(root / "dead-letter")

    @property
    def env(self) -> dict[str, str]:
        return {"ENTITLEMENTS_CONSUMER__STATE_DIR": str(self.root)}

    def quarantined(self, raw: bytes, seq: str = "100", reason: str = "not JSON") -> None:
        self.quarantine.put(
            raw=raw, reason=reason, stream_arn=STREAM, shard_id="shardId-1", sequence_number=seq
        )

    def dead_lettered(self, raw: bytes, seq: str = "100", handler: str = "cleanup") -> None:
        self.dead_letters.put(
            raw=raw,
            reason="the record names no account",
            handler=handler,
            stream_arn=STREAM,
            shard_id="shardId-1",
            sequence_number=seq,
        )


def use_handlers(monkeypatch: pytest.MonkeyPatch, registry: HandlerRegistry) -> None:
    """The commands build the consumer's handlers through the composition root: give them these."""
    monkeypatch.setattr(compose, "handler_registry", lambda settings: registry)

"""The switch-over's handover: one consumer hands on only its side of a handover time H.

Moving from the table's DynamoDB stream to its Kinesis stream, both consumers run into one lake for a
while, and every change is on both streams. Each consumer is given the same H
(`config.SourceSettings.handover_at`, a whole second in UTC): the DynamoDB stream's consumer hands on
(to every handler: the lake, the cleanup, the journal) only the changes created before H
(`keep="before"`), the Kinesis consumer only those at or after H (`keep="from"`), so each change is
handled by exactly one of them. A change is judged by its own ApproximateCreationDateTime
(`StreamEvent.created_at`): the DynamoDB stream's is the Kinesis one's rounded down to the second, and
for a whole-second H `floor(t) < H` is `t < H`, so both consumers put a change on the same side. Every
copy of a change (a Kinesis duplicate, a replay after a kill) has the change's time, so a consumer
restarted on the same settings puts it on the same side again.

The other side's changes are skipped before any handler (the consumer still takes them, so they are
checkpointed past: they are the other consumer's) and counted. `Handover.resolve` is what the shard
consumer calls on each read (`pipeline.shard_consumer`'s `item_order`); on the Kinesis side it wraps that
source's `pipeline.item_order.ItemOrder`, whose duplicates and per-item order are settled first.

With `stats_dir`, each read that held changes writes the shard's figures to `<stats_dir>/<shard>.json`
(counts and times only): how many were handed on and skipped, and the newest creation time seen. The
DynamoDB stream's consumer is done with a shard once it has seen a change at or after H
(`past_handover`) or read the shard to its end after H (docs/operations/sources.md, "Switch-over").
"""

from __future__ import annotations

__all__ = ["Handover", "HandoverStats", "ReadResolver", "Side"]

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from pipeline._stored_records import safe_name
from pipeline.events import StreamEvent
from schema import write_private_file

_T = TypeVar("_T")

# "before": the DynamoDB stream's consumer (changes created before H); "from": the Kinesis consumer's.
Side = Literal["before", "from"]


class ReadResolver(Protocol):
    """What the shard consumer hands each read's (record, event) pairs to before the handlers: the
    pairs returned are handed on, in that order; the others are only checkpointed past."""

    def resolve(self, read: Sequence[tuple[_T, StreamEvent]]) -> list[tuple[_T, StreamEvent]]: ...


@dataclass
class HandoverStats:
    """One shard's handover figures since the consumer began handing over at this H: a restarted
    consumer carries on from the shard's stats file (changes read again after a restart are counted
    again). Counts and times only."""

    shard_id: str
    handed: int = 0
    skipped: int = 0
    newest_seen: datetime | None = None  # the newest creation time of a change read, either side


class Handover:
    """Hands on only the changes of side `keep` of `at` (see the module). One per shard consumer."""

    def __init__(
        self,
        *,
        at: datetime,
        keep: Side,
        inner: ReadResolver | None = None,
        stats_dir: Path | None = None,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if at.tzinfo is None or at.utcoffset() is None:
            raise ValueError("the handover time must be aware")
        if at.microsecond:
            # The DynamoDB stream's times are whole seconds: a fraction would split one second's
            # changes between the consumers by a time only one of them can see.
            raise ValueError("the handover time must be a whole second")
        self._at = at.astimezone(UTC)
        self._keep = keep
        self._inner = inner
        self._stats_dir = stats_dir
        self._wall_clock = wall_clock
        self.stats: dict[str, HandoverStats] = {}

    @property
    def at(self) -> datetime:
        return self._at

    def keeps(self, event: StreamEvent) -> bool:
        """Whether the change is this consumer's to hand on."""
        return (event.created_at < self._at) is (self._keep == "before")

    def resolve(self, read: Sequence[tuple[_T, StreamEvent]]) -> list[tuple[_T, StreamEvent]]:
        pairs = list(read) if self._inner is None else self._inner.resolve(read)
        kept = [pair for pair in pairs if self.keeps(pair[1])]
        if read:
            # A read is of one shard; the figures are keyed by it anyway (one file per shard).
            stats = self._stats_of(read[0][1].position.shard_id)
            stats.handed += len(kept)
            stats.skipped += len(pairs) - len(kept)
            newest = max(event.created_at for _, event in read)
            if stats.newest_seen is None or newest > stats.newest_seen:
                stats.newest_seen = newest
            self._write(stats)
        return kept

    def past_handover(self, shard_id: str) -> bool:
        """Whether the shard has given a change created at or after H (this run or an earlier one)."""
        stats = self.stats.get(shard_id)
        return stats is not None and stats.newest_seen is not None and stats.newest_seen >= self._at

    def _stats_of(self, shard_id: str) -> HandoverStats:
        stats = self.stats.get(shard_id)
        if stats is None:
            stats = self.stats[shard_id] = self._written(shard_id) or HandoverStats(shard_id=shard_id)
        return stats

    def _path(self, shard_id: str) -> Path | None:
        return None if self._stats_dir is None else self._stats_dir / f"{safe_name(shard_id)}.json"

    def _written(self, shard_id: str) -> HandoverStats | None:
        """The figures an earlier run of this consumer wrote for the shard, at the same H and side: a
        child killed after reading the other side's changes checkpointed past them, so the run after it
        never sees them, and its figures alone would say nothing was skipped."""
        path = self._path(shard_id)
        try:
            body = json.loads(path.read_bytes()) if path is not None else None
        except (OSError, ValueError):
            return None  # none yet, or unreadable: begin again
        ours = (self._at.isoformat(), self._keep)
        if not isinstance(body, dict) or (body.get("handover_at"), body.get("keeps")) != ours:
            return None  # another handover's figures
        newest = body.get("newest_seen")
        return HandoverStats(
            shard_id=shard_id,
            handed=int(body.get("handed", 0)),
            skipped=int(body.get("skipped", 0)),
            newest_seen=None if newest is None else datetime.fromisoformat(newest),
        )

    def _write(self, stats: HandoverStats) -> None:
        path = self._path(stats.shard_id)
        if path is None:
            return
        body = {
            "shard_id": stats.shard_id,
            "handover_at": self._at.isoformat(),
            "keeps": self._keep,
            "handed": stats.handed,
            "skipped": stats.skipped,
            "newest_seen": None if stats.newest_seen is None else stats.newest_seen.isoformat(),
            "past_handover": self.past_handover(stats.shard_id),
            "updated_at": self._wall_clock().isoformat(),
        }
        write_private_file(path, json.dumps(body, sort_keys=True).encode())

"""The contract between the record processor and whatever consumes its events (the lake, processors).

A handler is given events with `add` and makes them durable with `flush`. The processor checkpoints a
shard only after every registered handler has flushed every event before the checkpoint, so anything a
handler has not made durable is redelivered after a crash. Handlers therefore see events at least once
and must be idempotent (key side effects by the event's identity or make them naturally repeatable).

`add` raises `schema.errors.RecordRejected` when the record's own content breaks the handler's rule:
that record alone is dead-lettered for that handler. Any other exception from `add` or `flush` is
transient: the consumer retries a `RetryableError` from `flush` with backoff, then parks the raw
records the handler had not finished (pipeline.parking) and calls `discard_pending`, so one failing
handler neither loses work nor stalls the shard.

A flush that fails after part of its work ended says which part by raising
`schema.errors.FlushIncomplete` with the (shard id, sequence number) of every event, given since the
last successful flush, that needs nothing more from it (its work done and its outputs handed to its
sinks, handed to another durable owner such as a retry queue, or nothing to do for it). Those records
are never parked or replayed for it; a flush raising anything else is taken to have finished nothing.
A handler keeps pending only what it did not finish, so the consumer's retry redoes only that. Listing
the finished (rather than the failed, as Lambda's partial batch response does) errs towards a retry,
never towards a loss.

A handler may hand its outputs to other handlers (the cleanup processor hands its outcomes to the lake).
It says so when registered (`feeds=("lake",)`), and the registry flushes every producer before the sinks
it feeds, whatever the registration order, so a producer's outputs are durable before the checkpoint.
"""

from __future__ import annotations

__all__ = ["Handler", "HandlerRegistry"]

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pipeline.events import StreamEvent


@runtime_checkable
class Handler(Protocol):
    @property
    def name(self) -> str:
        """A short, stable name used in logs, metrics and parked-work files."""
        ...

    def add(self, event: StreamEvent) -> None:
        """Take one event. Cheap: buffer it; do the work in `flush`. Raise `RecordRejected` for a
        record whose own content breaks a rule (it is dead-lettered alone)."""
        ...

    def flush(self) -> None:
        """Make everything added so far durable. Return only when it is; raise `FlushIncomplete`
        naming what finished when only part of it is."""
        ...

    def discard_pending(self) -> None:
        """Forget what was added since the last successful flush: the consumer has parked it durably
        (as raw records) after the handler failed to flush, and will replay it through the same path."""
        ...


@dataclass(frozen=True, slots=True)
class _Entry:
    handler: Handler
    feeds: tuple[str, ...]
    receives_events: bool


class HandlerRegistry:
    """Handlers in the order they are flushed: every producer before the sinks it feeds, otherwise in
    registration order. Entry points register; the consumer only iterates.

    A cycle is refused when it is registered; a `feeds` name that no handler has is refused when the
    order is first asked for (iteration), so sinks may be registered after their producers.
    """

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._order: tuple[Handler, ...] | None = None

    def register(self, handler: Handler, *, feeds: Sequence[str] = ()) -> Handler:
        return self._register(handler, feeds=tuple(feeds), receives_events=True)

    def __iter__(self) -> Iterator[Handler]:
        return iter(self.ordered())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __getitem__(self, name: str) -> Handler:
        return self._entries[name].handler

    def ordered(self) -> tuple[Handler, ...]:
        """Every handler in flush order. Raises `ValueError` for a sink no handler is named."""
        if self._order is None:
            self._order = tuple(self._entries[name].handler for name in self._topological())
        return self._order

    def receivers(self) -> tuple[Handler, ...]:
        """The handlers given each event (in flush order); the others are flushed only."""
        return tuple(h for h in self.ordered() if self._entries[h.name].receives_events)

    def feeds(self, name: str) -> tuple[str, ...]:
        """The handlers `name` hands its outputs to directly."""
        return self._entries[name].feeds

    def downstream(self, name: str) -> tuple[str, ...]:
        """Every handler `name` feeds, directly or through another, in flush order."""
        reached: set[str] = set()
        stack = list(self.feeds(name))
        while stack:
            sink = stack.pop()
            if sink not in reached:
                reached.add(sink)
                stack.extend(self.feeds(sink))
        return tuple(h.name for h in self.ordered() if h.name in reached)

    def upstream(self, name: str) -> tuple[str, ...]:
        """Every handler that feeds `name`, directly or through another, in flush order."""
        return tuple(h.name for h in self.ordered() if name in self.downstream(h.name))

    def replaying(self, name: str) -> HandlerRegistry:
        """A registry for replaying one handler's stored records: `name` is given the events, and the
        sinks it feeds are flushed only (they already have the stream's own events)."""
        self.ordered()  # validate first
        part = HandlerRegistry()
        part._register(self[name], feeds=self.feeds(name), receives_events=True)
        for sink in self.downstream(name):
            part._register(self[sink], feeds=self.feeds(sink), receives_events=False)
        return part

    def _register(self, handler: Handler, *, feeds: tuple[str, ...], receives_events: bool) -> Handler:
        name = handler.name
        if name in self._entries:
            raise ValueError(f"a handler named {name!r} is already registered")
        if name in feeds:
            raise ValueError(f"handler {name!r} cannot feed itself")
        if len(set(feeds)) != len(feeds):
            raise ValueError(f"handler {name!r} names a sink twice")
        entry = _Entry(handler=handler, feeds=feeds, receives_events=receives_events)
        self._entries[name] = entry
        try:
            self._check_acyclic()
        except ValueError:
            del self._entries[name]
            raise
        self._order = None
        return handler

    def _check_acyclic(self) -> None:
        # Only registered names can close a cycle; unknown ones are checked by `_topological`.
        state: dict[str, int] = {}  # 1 visiting, 2 done

        def visit(name: str) -> None:
            state[name] = 1
            for sink in self._entries[name].feeds:
                if sink not in self._entries:
                    continue
                if state.get(sink) == 1:
                    raise ValueError(f"handlers feed each other in a cycle through {sink!r}")
                if sink not in state:
                    visit(sink)
            state[name] = 2

        for name in self._entries:
            if name not in state:
                visit(name)

    def _topological(self) -> list[str]:
        """Kahn's algorithm, taking the earliest-registered ready handler each time (stable)."""
        incoming = {name: 0 for name in self._entries}
        for name, entry in self._entries.items():
            for sink in entry.feeds:
                if sink not in self._entries:
                    raise ValueError(f"handler {name!r} feeds {sink!r}, which is not registered")
                incoming[sink] += 1
        registered = list(self._entries)
        order: list[str] = []
        ready = [name for name in registered if incoming[name] == 0]
        while ready:
            name = min(ready, key=registered.index)
            ready.remove(name)
            order.append(name)
            for sink in self._entries[name].feeds:
                incoming[sink] -= 1
                if incoming[sink] == 0:
                    ready.append(sink)
        if len(order) != len(registered):  # unreachable: cycles are refused at registration
            raise ValueError("handlers feed each other in a cycle")
        return order

"""Ordered lanes inside a shard: a handler's work on N lanes, one item's records in stream order, different
items at once, and what the consumer checkpoints while some of it still runs.

`Lanes` runs tickets (one record's work each) on at most `count` threads. A ticket names its item by a key
(`item_key`: a digest of the table item's pk/sk, so the lanes hold no key text): one key's tickets run one
after another in the order they were submitted, never two at once; tickets of different keys run side by
side. A key is not pinned to one lane by its hash (as Lambda's ParallelizationFactor pins a partition key):
a free lane takes the oldest ready key, so a slow item holds its own later records and one lane, never the
other items that would have shared its lane.

A ticket ends `DONE` (its work returned), `FAILED` (it raised, or the owner's `failed` rule says its result
is a failure), `GIVEN_UP` (the owner stopped waiting for it: `give_up`; its thread may still be in a call,
and its key stays busy until that returns, so one item never runs twice at once) or `HELD`: an earlier
ticket of its key failed or was given up, so it never ran. A failure holds only its own key: the key's
tickets queued at that moment, and any submitted before the owner `release`s the key (after it has sent
the failure and its held tickets on, to a retry queue or a parked store), end `HELD`; every other key
carries on. So one key's work never completes out of stream order.

`settle` is how a flush waits: until every ticket ended, or a deadline, or (with `slow_after`) until some
ticket ended and each one left is slow: running for `slow_after` or more, or queued behind slow work. The
flush then returns what ended, and the slow work runs on (`LanedHandler.running`): the shard consumer keeps
those records, and checkpoints only below the lowest one still running on any handler's lanes
(`pipeline.shard_consumer`), so the checkpoint never passes an unfinished record, and a slow item delays
neither the others' outcomes nor the records after it, only the checkpoint.

Threads are started when work is ready and end when none is: an idle `Lanes` holds no thread.
"""

from __future__ import annotations

__all__ = ["LanedHandler", "Lanes", "Position", "Ticket", "TicketState", "item_key"]

import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

# (shard id, sequence number): a record's position, as `schema.errors.FlushIncomplete` names it.
Position = tuple[str, str]


def item_key(keys: Mapping[str, Any]) -> bytes:
    """The lane key of a table item: a digest of its primary key (pk, sk), never the key itself."""
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(keys):
        digest.update(f"{name}\x00{keys[name]!r}\x00".encode())
    return digest.digest()


@runtime_checkable
class LanedHandler(Protocol):
    """A handler whose flush may return while some of its records still run on its lanes."""

    def running(self) -> frozenset[Position]:
        """The records given to it (since ever) that are neither finished nor failed: still queued or
        running on its lanes after its last flush returned. The consumer keeps them and never checkpoints
        past the lowest; a later flush reports them finished (absent from here, or named by a
        `FlushIncomplete`) or failed."""
        ...

    def abandon(self) -> None:
        """Forget every record, the running ones too (their results are dropped when they come): the
        lease is lost, and the shard's new owner handles them again from the last checkpoint."""
        ...


class TicketState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    GIVEN_UP = "given_up"
    HELD = "held"


_ENDED = frozenset({TicketState.DONE, TicketState.FAILED, TicketState.GIVEN_UP, TicketState.HELD})


class Ticket(Generic[T]):
    """One record's work on the lanes. Read its fields after it ended (`ended`)."""

    __slots__ = ("_run", "ended_at", "error", "key", "position", "started_at", "state", "value")

    def __init__(self, key: Hashable, position: Position, run: Callable[[], T]) -> None:
        self.key = key
        self.position = position
        self._run: Callable[[], T] | None = run
        self.state = TicketState.QUEUED
        self.value: T | None = None
        self.error: BaseException | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None

    @property
    def ended(self) -> bool:
        return self.state in _ENDED


class Lanes(Generic[T]):
    def __init__(
        self,
        count: int,
        *,
        name: str = "lane",
        failed: Callable[[T], bool] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if count < 1:
            raise ValueError("a handler needs at least one lane")
        self._count = count
        self._name = name
        self._failed = failed
        self._monotonic = monotonic
        self._cond = threading.Condition()
        self._chains: dict[Hashable, deque[Ticket[T]]] = {}  # key -> its queued tickets, in order
        self._busy: dict[Hashable, Ticket[T]] = {}  # key -> its ticket on a lane (a given-up one too)
        self._ready: deque[Hashable] = deque()  # keys with queued work and nothing on a lane
        self._held: set[Hashable] = set()
        self._alive = 0  # lane threads
        self._executing = 0  # of them, in a ticket's work
        self._abandoned: set[int] = set()  # id() of tickets on a lane whose result nobody reads

    @property
    def count(self) -> int:
        return self._count

    def submit(self, items: Iterable[tuple[Hashable, Position, Callable[[], T]]]) -> list[Ticket[T]]:
        """Queue each (key, position, work) behind its key's earlier tickets; all at once, so a failure
        meanwhile holds every later ticket of its key."""
        tickets: list[Ticket[T]] = []
        with self._cond:
            for key, position, run in items:
                ticket = Ticket(key, position, run)
                tickets.append(ticket)
                if key in self._held:
                    self._end(ticket, TicketState.HELD)
                    continue
                chain = self._chains.setdefault(key, deque())
                chain.append(ticket)
                if len(chain) == 1 and key not in self._busy:
                    self._ready.append(key)
            self._dispatch()
            self._cond.notify_all()
        return tickets

    def settle(self, tickets: Sequence[Ticket[T]], *, until: float, slow_after: float | None = None) -> None:
        """Wait until every ticket ended or `until` (a `monotonic` instant); with `slow_after`, also until
        some ticket ended and each one left is slow (running `slow_after` or more, or queued behind slow
        work: its key's, or every lane's)."""
        with self._cond:
            while True:
                now = self._monotonic()
                if now >= until:
                    return
                pending = [t for t in tickets if not t.ended]
                if not pending:
                    return
                wake = until
                if slow_after is not None and len(pending) < len(tickets):
                    turns_slow = self._slow_from(pending, slow_after, now)
                    if turns_slow is None:
                        return
                    wake = min(wake, turns_slow)
                self._cond.wait(timeout=max(0.0, wake - now))

    def give_up(self, ticket: Ticket[T]) -> bool:
        """Stop waiting for a ticket that has not ended: it ends `GIVEN_UP` (a queued one never runs)
        and holds its key. False when it had ended already."""
        with self._cond:
            if ticket.ended:
                return False
            if ticket.state is TicketState.QUEUED:
                chain = self._chains.get(ticket.key)
                if chain is not None and ticket in chain:
                    chain.remove(ticket)
            else:
                self._abandoned.add(id(ticket))
            self._end(ticket, TicketState.GIVEN_UP)
            self._hold(ticket.key)
            self._cond.notify_all()
            return True

    def release(self, key: Hashable) -> None:
        """The owner has sent a failure of `key` (and its held tickets) on: the key runs again."""
        with self._cond:
            self._held.discard(key)

    def abandon(self) -> None:
        """Drop every queued ticket and every hold; the tickets on a lane finish unread."""
        with self._cond:
            for chain in self._chains.values():
                for ticket in chain:
                    self._end(ticket, TicketState.HELD)
            self._chains.clear()
            self._ready.clear()
            self._held.clear()
            self._abandoned.update(id(t) for t in self._busy.values())
            self._cond.notify_all()

    # -- internals (under the condition's lock) -------------------------------------------------------

    def _slow_from(self, pending: list[Ticket[T]], slow_after: float, now: float) -> float | None:
        """None when every pending ticket is slow; else the earliest instant one may turn slow (or
        `inf` when one waits on work that is not slow yet)."""
        slow_keys = {
            key
            for key, t in self._busy.items()
            if t.state is TicketState.GIVEN_UP
            or (t.started_at is not None and now - t.started_at >= slow_after)
        }
        lanes_blocked = len(slow_keys) >= self._count
        earliest: float | None = None
        for ticket in pending:
            if ticket.state is TicketState.RUNNING and ticket.started_at is not None:
                if now - ticket.started_at >= slow_after:
                    continue
                turns = ticket.started_at + slow_after
            elif ticket.key in slow_keys or lanes_blocked:
                continue
            else:
                turns = float("inf")  # queued behind work that is not slow: it will run
            earliest = turns if earliest is None else min(earliest, turns)
        return earliest

    def _end(self, ticket: Ticket[T], state: TicketState) -> None:
        ticket.state = state
        ticket.ended_at = self._monotonic()
        ticket._run = None

    def _hold(self, key: Hashable) -> None:
        self._held.add(key)
        chain = self._chains.pop(key, None)
        if chain:
            for queued in chain:
                self._end(queued, TicketState.HELD)
        if key in self._ready:
            self._ready.remove(key)

    def _dispatch(self) -> None:
        while self._alive < self._count and self._alive - self._executing < len(self._ready):
            self._alive += 1
            threading.Thread(target=self._lane, name=f"{self._name}-{self._alive}", daemon=True).start()

    def _lane(self) -> None:
        with self._cond:
            while True:
                if not self._ready:
                    self._alive -= 1
                    return
                key = self._ready.popleft()
                chain = self._chains[key]
                ticket = chain.popleft()
                if not chain:
                    del self._chains[key]
                self._busy[key] = ticket
                ticket.state = TicketState.RUNNING
                ticket.started_at = self._monotonic()
                run = ticket._run
                self._executing += 1
                self._cond.release()
                value: T | None = None
                error: BaseException | None = None
                try:
                    if run is not None:
                        value = run()
                except Exception as raised:  # the owner decides what a failure means; the lane goes on
                    error = raised
                finally:
                    self._cond.acquire()
                    self._executing -= 1
                self._finish(key, ticket, value, error)
                self._cond.notify_all()

    def _finish(self, key: Hashable, ticket: Ticket[T], value: T | None, error: BaseException | None) -> None:
        del self._busy[key]
        if id(ticket) in self._abandoned:
            self._abandoned.discard(id(ticket))
        elif not ticket.ended:
            ticket.value = value
            ticket.error = error
            failed = error is not None or (
                self._failed is not None and value is not None and self._failed(value)
            )
            self._end(ticket, TicketState.FAILED if failed else TicketState.DONE)
            if failed:
                self._hold(key)
        if key in self._chains and key not in self._ready:
            self._ready.append(key)

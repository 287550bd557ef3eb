"""Ordered lanes (pipeline.lanes) and what the shard consumer checkpoints while a handler's work still runs
on them: one item's records in stream order, a slow item holding nobody else, a failure holding only its
own item, and a checkpoint that never passes an unfinished record."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.dead_letter import DeadLetters
from pipeline.events import EventType, StreamPosition
from pipeline.handlers import HandlerRegistry
from pipeline.lanes import Lanes, Position, Ticket, TicketState, item_key
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from pipeline.shard_consumer import CommitPolicy, HandlerRetryPolicy, ShardConsumer

WAIT = 10.0  # seconds any test waits for a thread at most (a bound, never a timing assertion)


def _position(n: int) -> Position:
    return ("shardId-1", str(n))


def _settled(lanes: Lanes[Any], tickets: list[Ticket[Any]]) -> None:
    lanes.settle(tickets, until=time.monotonic() + WAIT)
    assert all(t.ended for t in tickets)


def test_one_items_tickets_run_in_submission_order_and_never_two_at_once() -> None:
    lanes: Lanes[int] = Lanes(4)
    order: list[int] = []
    running = threading.Semaphore(1)
    overlaps: list[int] = []

    def work(n: int) -> Callable[[], int]:
        def run() -> int:
            if not running.acquire(blocking=False):
                overlaps.append(n)
                running.acquire()
            time.sleep(0.001)
            order.append(n)
            running.release()
            return n

        return run

    tickets = lanes.submit(("item-a", _position(n), work(n)) for n in range(30))
    _settled(lanes, tickets)
    assert order == list(range(30))
    assert overlaps == []


def test_a_slow_item_does_not_hold_another_item() -> None:
    lanes: Lanes[str] = Lanes(2)
    release = threading.Event()
    others_done = threading.Event()

    def slow() -> str:
        release.wait(WAIT)
        return "slow"

    done: list[str] = []

    def quick(key: str) -> Callable[[], str]:
        def run() -> str:
            done.append(key)
            if len(done) == 20:
                others_done.set()
            return key

        return run

    # Twenty other items: with keys pinned to lanes by hash, about half would wait behind the slow one.
    [slow_ticket] = lanes.submit([("slow", _position(0), slow)])
    others = lanes.submit((f"item-{n}", _position(n + 1), quick(f"item-{n}")) for n in range(20))
    assert others_done.wait(WAIT)
    _settled(lanes, others)
    assert all(t.state is TicketState.DONE for t in others)
    assert slow_ticket.state is TicketState.RUNNING  # the slow one is still in its call
    release.set()
    _settled(lanes, [slow_ticket])
    assert slow_ticket.value == "slow"


def test_a_failure_holds_only_its_own_items_later_tickets() -> None:
    lanes: Lanes[str] = Lanes(3)
    ran: list[str] = []

    def work(name: str, fail: bool = False) -> Callable[[], str]:
        def run() -> str:
            ran.append(name)
            if fail:
                raise RuntimeError("transient")
            return name

        return run

    tickets = lanes.submit(
        [
            ("a", _position(1), work("a1", fail=True)),
            ("b", _position(2), work("b1")),
            ("a", _position(3), work("a2")),
            ("b", _position(4), work("b2")),
            ("a", _position(5), work("a3")),
        ]
    )
    _settled(lanes, tickets)
    assert [t.state for t in tickets] == [
        TicketState.FAILED,
        TicketState.DONE,
        TicketState.HELD,
        TicketState.DONE,
        TicketState.HELD,
    ]
    assert "a2" not in ran and "a3" not in ran
    # Until its owner has sent the failure on, the item stays held; then it runs again.
    [while_held] = lanes.submit([("a", _position(6), work("a4"))])
    assert while_held.state is TicketState.HELD
    lanes.release("a")
    [after] = lanes.submit([("a", _position(7), work("a5"))])
    _settled(lanes, [after])
    assert after.state is TicketState.DONE


def test_a_result_the_owners_rule_calls_failed_holds_the_item() -> None:
    lanes: Lanes[str] = Lanes(2, failed=lambda value: value == "parked")
    tickets = lanes.submit([("a", _position(1), lambda: "parked"), ("a", _position(2), lambda: "fine")])
    _settled(lanes, tickets)
    assert [t.state for t in tickets] == [TicketState.FAILED, TicketState.HELD]
    assert tickets[0].value == "parked"


def test_per_item_order_holds_under_injected_failures_zero_reorderings() -> None:
    """Forty items, ten records each, a quarter of all runs failing at random: the owner resubmits each
    failure and the records held behind it, in order, after it released the item (as a consumer's retry
    does). Every record ends done, and no item's records completed out of stream order."""
    rng = random.Random(22)
    lanes: Lanes[int] = Lanes(8)
    completed: dict[Hashable, list[int]] = {}
    lock = threading.Lock()
    stream = [(f"item-{rng.randrange(40)}", n) for n in range(400)]

    def work(key: str, n: int) -> Callable[[], int]:
        fail = rng.random() < 0.25  # drawn now, in the owner's thread: the seed decides the run
        jitter = rng.random() * 0.001

        def run() -> int:
            time.sleep(jitter)
            if fail:
                raise RuntimeError("injected")
            with lock:
                completed.setdefault(key, []).append(n)
            return n

        return run

    todo = stream
    rounds = 0
    while todo:
        rounds += 1
        assert rounds < 100
        tickets = lanes.submit((key, _position(n), work(key, n)) for key, n in todo)
        _settled(lanes, tickets)
        todo = [(str(t.key), int(t.position[1])) for t in tickets if t.state is not TicketState.DONE]
        for key in {key for key, _ in todo}:
            lanes.release(key)
    reorderings = sum(
        1 for numbers in completed.values() for before, after in itertools.pairwise(numbers) if after < before
    )
    assert reorderings == 0
    assert sorted(n for numbers in completed.values() for n in numbers) == list(range(400))
    assert rounds > 1  # the failures did bite


def test_settle_with_slow_after_returns_once_the_rest_ended_and_the_slow_one_runs_on() -> None:
    lanes: Lanes[str] = Lanes(4)
    release = threading.Event()
    tickets = lanes.submit(
        [
            ("slow", _position(1), lambda: "slow" if release.wait(WAIT) else "unreleased"),
            *((f"q{n}", _position(n + 2), lambda: "quick") for n in range(6)),
        ]
    )
    lanes.settle(tickets, until=time.monotonic() + WAIT, slow_after=0.05)
    assert all(t.state is TicketState.DONE for t in tickets[1:])
    assert tickets[0].state is TicketState.RUNNING
    release.set()
    _settled(lanes, tickets[:1])


def test_settle_without_anything_ended_waits_for_the_slow_one() -> None:
    lanes: Lanes[str] = Lanes(2)

    def slow() -> str:
        time.sleep(0.2)
        return "slow"

    [ticket] = lanes.submit([("slow", _position(1), slow)])
    lanes.settle([ticket], until=time.monotonic() + WAIT, slow_after=0.01)
    assert ticket.state is TicketState.DONE  # returning early would have handed nothing on


def test_a_given_up_ticket_holds_its_item_which_runs_nothing_until_its_call_returns() -> None:
    lanes: Lanes[str] = Lanes(3)
    release = threading.Event()
    started: list[str] = []

    def hung() -> str:
        started.append("hung")
        release.wait(WAIT)
        return "late"

    [first, behind] = lanes.submit([("a", _position(1), hung), ("a", _position(2), lambda: "behind")])
    deadline = time.monotonic() + WAIT
    while not started and time.monotonic() < deadline:
        time.sleep(0.005)
    assert lanes.give_up(first)
    assert first.state is TicketState.GIVEN_UP
    assert behind.state is TicketState.HELD
    lanes.release("a")
    [next_one] = lanes.submit([("a", _position(3), lambda: "next")])
    time.sleep(0.05)
    assert next_one.state is TicketState.QUEUED  # the item's given-up call is still running
    release.set()
    _settled(lanes, [next_one])
    assert next_one.value == "next"
    assert first.value is None  # the late result is not read


def test_idle_lanes_hold_no_thread() -> None:
    lanes: Lanes[int] = Lanes(4, name="idle-check")
    tickets = lanes.submit((f"k{n}", _position(n), lambda: 1) for n in range(10))
    _settled(lanes, tickets)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and any(t.name.startswith("idle-check") for t in threading.enumerate()):
        time.sleep(0.01)
    assert not any(t.name.startswith("idle-check") for t in threading.enumerate())


def test_the_lane_key_is_a_digest_of_the_items_key_never_the_key_itself() -> None:
    key = item_key({"pk": "USER#u-1", "sk": "STALE#acct-1"})
    assert key == item_key({"sk": "STALE#acct-1", "pk": "USER#u-1"})
    assert key != item_key({"pk": "USER#u-1", "sk": "STALE#acct-2"})
    assert b"u-1" not in key and b"acct" not in key


# -- the shard consumer with a laned handler ----------------------------------------------------------

SHARD = "shardId-1"


@dataclass(frozen=True)
class _Event:
    """What the consumer reads of an event, and where it sits; its payload `item:n` names its item."""

    event_id: str
    position: StreamPosition
    event_type: EventType = EventType.UNKNOWN_ITEM
    created_at: datetime = datetime(2026, 1, 1, tzinfo=UTC)


def _decode(data: bytes, *, stream_arn: str, shard_id: str, sequence_number: str | None = None) -> Any:
    position = StreamPosition(
        stream_arn=stream_arn, shard_id=shard_id, sequence_number=sequence_number or "0"
    )
    return _Event(data.decode(), position)


class LanedRecorder:
    """A handler whose flush runs each event's work on lanes keyed by its item and returns once the rest
    ended while the `slow` events still run (`slow_after`), as the cleanup handler does."""

    def __init__(self, *, slow: set[str], release: threading.Event) -> None:
        self.name = "laned"
        self.lanes: Lanes[str] = Lanes(4)
        self._slow = slow
        self._release = release
        self._new: list[_Event] = []
        self._on_lanes: list[tuple[_Event, Ticket[str]]] = []
        self.done: list[str] = []

    def add(self, event: Any) -> None:
        self._new.append(event)

    def flush(self) -> None:
        def work(event_id: str) -> Callable[[], str]:
            def run() -> str:
                if event_id in self._slow:
                    self._release.wait(WAIT)
                return event_id

            return run

        tickets = self.lanes.submit(
            (e.event_id.split(":")[0], (e.position.shard_id, e.position.sequence_number), work(e.event_id))
            for e in self._new
        )
        self._on_lanes += list(zip(self._new, tickets, strict=True))
        self._new = []
        self.lanes.settle([t for _, t in self._on_lanes], until=time.monotonic() + WAIT, slow_after=0.05)
        self.done += [e.event_id for e, t in self._on_lanes if t.ended]
        self._on_lanes = [(e, t) for e, t in self._on_lanes if not t.ended]

    def discard_pending(self) -> None:
        self._new = []

    def running(self) -> frozenset[Position]:
        return frozenset((e.position.shard_id, e.position.sequence_number) for e, _ in self._on_lanes)

    def abandon(self) -> None:
        self._on_lanes = []
        self.lanes.abandon()


def _consumer(tmp_path: Path, handler: LanedRecorder) -> ShardConsumer:
    registry = HandlerRegistry()
    registry.register(handler)
    consumer = ShardConsumer(
        stream_arn="arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/2026-01-01T00:00:00.000",
        handlers=registry,
        decode=_decode,
        quarantine=Quarantine(tmp_path / "quarantine"),
        parked=ParkedWork(tmp_path / "parked"),
        dead_letters=DeadLetters(tmp_path / "dead"),
        commit=CommitPolicy(every_records=10_000, interval_seconds=3600),
        retry=HandlerRetryPolicy(attempts=2, max_seconds=1, initial_wait=0.001, max_wait=0.002),
    )
    consumer.start(SHARD)
    return consumer


def _records(*payloads: str) -> list[RawRecord]:
    return [RawRecord(p.encode(), str(100 + i)) for i, p in enumerate(payloads)]


def test_the_checkpoint_never_passes_a_record_still_running_on_a_handlers_lanes(tmp_path: Path) -> None:
    release = threading.Event()
    handler = LanedRecorder(slow={"b:1"}, release=release)
    consumer = _consumer(tmp_path, handler)
    checkpoints: list[str | None] = []
    window = _records("a:1", "b:1", "c:1", "a:2", "d:1")
    consumer.process(window, checkpoints.append)
    consumer.commit(checkpoints.append)
    # Every other record finished; the checkpoint stops below the slow one.
    assert sorted(handler.done) == ["a:1", "a:2", "c:1", "d:1"]
    assert checkpoints == [window[0].sequence_number]
    assert handler.running() == {(SHARD, window[1].sequence_number)}
    assert consumer.stats.running_on_lanes == 1  # what an operator reads beside the held checkpoint
    # Committed again while the slow record still runs, with more records: still no checkpoint past it.
    consumer.process(_records("e:1"), checkpoints.append)
    consumer.commit(checkpoints.append)
    assert checkpoints == [window[0].sequence_number]
    release.set()
    consumer.commit(checkpoints.append, settle=True)
    assert "b:1" in handler.done
    assert consumer.stats.running_on_lanes == 0
    assert checkpoints == [window[0].sequence_number, "100"]  # "e:1" was numbered 100 again


def test_no_checkpoint_while_the_first_record_since_the_last_one_still_runs(tmp_path: Path) -> None:
    release = threading.Event()
    handler = LanedRecorder(slow={"a:1"}, release=release)
    consumer = _consumer(tmp_path, handler)
    checkpoints: list[str | None] = []
    consumer.process(_records("a:1", "b:1", "c:1"), checkpoints.append)
    consumer.commit(checkpoints.append)
    assert checkpoints == []
    assert sorted(handler.done) == ["b:1", "c:1"]
    release.set()
    consumer.commit(checkpoints.append, settle=True)
    assert checkpoints == ["102"]


def test_a_record_still_running_is_neither_parked_nor_dead_lettered(tmp_path: Path) -> None:
    release = threading.Event()
    handler = LanedRecorder(slow={"a:1"}, release=release)
    consumer = _consumer(tmp_path, handler)
    consumer.process(_records("a:1", "b:1"), lambda _: None)
    report = consumer.commit(lambda _: None)
    assert report.stored == ()
    assert list((tmp_path / "parked").glob("**/*")) == [] or not (tmp_path / "parked").exists()
    release.set()
    consumer.commit(lambda _: None, settle=True)


def test_the_shard_ends_only_after_the_running_work_finished(tmp_path: Path) -> None:
    release = threading.Event()
    handler = LanedRecorder(slow={"a:1"}, release=release)
    consumer = _consumer(tmp_path, handler)
    checkpoints: list[str | None] = []
    consumer.process(_records("a:1", "b:1"), checkpoints.append)
    threading.Timer(0.2, release.set).start()
    consumer.shard_ended(checkpoints.append)
    assert "a:1" in handler.done
    assert checkpoints == [None]


def test_a_lost_lease_abandons_the_running_work(tmp_path: Path) -> None:
    release = threading.Event()
    handler = LanedRecorder(slow={"a:1"}, release=release)
    consumer = _consumer(tmp_path, handler)
    consumer.process(_records("a:1", "b:1"), lambda _: None)
    consumer.commit(lambda _: None)
    assert handler.running()
    consumer.lease_lost()
    assert handler.running() == frozenset()
    release.set()

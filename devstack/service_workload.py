"""The workload through the entitlements service: the mix as HTTP requests from N concurrent clients.

`entitlements simulate --clients N` (and the race test) drive the service's routes (`service.app`):

    POST /{user_id}/signup, /cancellation, /reactivation, /array-signup, /processor

The mix's weights (`devstack.workload.Mix`) pick each next operation from a seeded generator, under
three rules that keep the workload to what real users do:

- each user signs up once, and nothing else happens to a user before their signup has answered;
- at most one request other than a relink is in flight per user (so at most one second signup);
- a relink (`POST /{user_id}/processor`) may be in flight beside one of them: `contention` is the share
  of cancellations and second signups aimed at users with a relink in flight, so the race the service
  design guards against (docs/table.md: a link holding a row across its two network calls while the row
  is retired or cancelled) happens by itself.
  With SaveIfActive the service answers such a link 404 (`entitlement_not_active`), terminal.

`concurrent_same_user` (bursts per second; 0 none) adds, beside the clients, bursts of two requests for
ONE user sent at the same instant (a barrier releases both): two signups of a fresh user, or two second
signups of an active one, so the service's own concurrency guard is what decides, as it must when a
client retries or double-submits. The user is taken out of the mix for the burst. The service answers
the loser 409 `concurrent_request` (docs/table.md): a documented answer, counted as such, never a
failure; any other answer than 2xx or that is counted as undocumented.

Which interleavings happen is left to the threads (the fakes' latency widens the window); the demo forces
them instead, through the fakes' hooks. The choices are seeded; the timing is not.

The summary counts requests and answers by operation and status (never ids); the service's own counts
(`GET /stats`) are fetched at the end. Logs hold counts only.
"""

from __future__ import annotations

__all__ = ["SameUserBursts", "WorkloadConfig", "WorkloadSummary", "run_service_workload"]

import logging
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from devstack.planted_faults import PlantedFault
from devstack.workload import Bag, Mix, Operation

_log = logging.getLogger(__name__)

_PATHS = {
    Operation.SIGNUP: "signup",
    Operation.CANCEL: "cancellation",
    Operation.REACTIVATE: "reactivation",
    Operation.SECOND_SIGNUP: "array-signup",
    Operation.RELINK: "processor",
}
NOT_ACTIVE = "entitlement_not_active"
CONCURRENT_REQUEST = "concurrent_request"
_BURST_SIZE = 2  # requests of one user released together


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    users: int = 50
    operations: int = 200
    clients: int = 4
    mix: Mix = field(default_factory=Mix)
    seed: int = 0
    contention: float = 0.5
    rate: float = 0.0  # requests per second over all clients; 0 is as fast as the service answers
    request_timeout_seconds: float = 30.0
    concurrent_same_user: float = 0.0  # bursts per second of two simultaneous requests for one user
    # Prefixed to every user id: runs in one process share moto's state, so each run names its own users.
    namespace: str = ""

    def __post_init__(self) -> None:
        if self.users < 1 or self.clients < 1:
            raise ValueError("users and clients must be at least 1")
        if self.operations < 0 or self.rate < 0 or self.concurrent_same_user < 0:
            raise ValueError("operations, rate and concurrent_same_user must be non-negative")
        if not 0.0 <= self.contention <= 1.0:
            raise ValueError("contention must be between 0 and 1")


@dataclass(slots=True)
class WorkloadSummary:
    seed: int
    users: int
    clients: int
    operations_requested: int
    operations: dict[str, int] = field(default_factory=lambda: {op.value: 0 for op in Operation})
    answers: dict[str, dict[str, int]] = field(default_factory=lambda: {op.value: {} for op in Operation})
    relinks_linked: int = 0
    relinks_rejected: int = 0  # 404 entitlement_not_active: ErrEntitlementNotActive, terminal
    relinks_contended: int = 0  # relinks during which another request of the same user was in flight
    same_account: int = 0  # second signups answered 200: Array returned the account already held
    unavailable: int = 0  # 503s (safe to retry; the workload does not)
    transport_errors: int = 0
    idle: int = 0
    service_stats: dict[str, Any] = field(default_factory=dict)
    planted_faults: list[PlantedFault] = field(default_factory=list)
    unguarded_links: dict[str, int] | None = None
    same_user: SameUserBursts | None = None

    def to_json(self, *, include_keys: bool = False) -> dict[str, Any]:
        """The summary as JSON-ready data. Item keys and canary tokens only with `include_keys`."""
        out: dict[str, Any] = {
            "mode": "service",
            "seed": self.seed,
            "users": self.users,
            "clients": self.clients,
            "operations_requested": self.operations_requested,
            "operations": dict(self.operations),
            "answers": {op: dict(sorted(by.items())) for op, by in self.answers.items()},
            "relinks_linked": self.relinks_linked,
            "relinks_rejected": self.relinks_rejected,
            "relinks_contended": self.relinks_contended,
            "same_account": self.same_account,
            "unavailable": self.unavailable,
            "transport_errors": self.transport_errors,
            "idle": self.idle,
            "service_stats": self.service_stats,
            # Anomalies the service cannot produce, written straight to the table and labelled so.
            "planted_by_direct_write": [f.to_json(include_keys=include_keys) for f in self.planted_faults],
        }
        if self.unguarded_links is not None:
            out["unguarded_links"] = dict(self.unguarded_links)
        if self.same_user is not None:
            out["concurrent_same_user"] = self.same_user.to_json()
        return out


@dataclass(slots=True)
class SameUserBursts:
    """What the bursts of simultaneous same-user requests came to (counts only, never ids)."""

    bursts: int = 0
    requests: int = 0
    answers: dict[str, dict[str, int]] = field(default_factory=dict)  # operation -> status -> count
    concurrent_request: int = 0  # 409 concurrent_request: the documented answer to the loser
    undocumented: int = 0  # neither 2xx nor 409 concurrent_request (nor 503 / a transport error)
    overlapped: int = 0  # bursts whose requests were all in flight at once (seen by the workload)

    def to_json(self) -> dict[str, Any]:
        return {
            "bursts": self.bursts,
            "requests": self.requests,
            "answers": {op: dict(sorted(by.items())) for op, by in sorted(self.answers.items())},
            "concurrent_request": self.concurrent_request,
            "undocumented": self.undocumented,
            "overlapped": self.overlapped,
        }


@dataclass(slots=True, eq=False)
class _User:
    user_id: str
    state: str = "fresh"  # fresh, active, cancelled, retired (the model lost track: left alone)
    busy: bool = False  # a request other than a relink is in flight
    relinking: bool = False
    contended: bool = False  # another request started while this user's relink was in flight


class _Model:
    """The users' believed states and what may be sent next; every method runs under `lock`."""

    def __init__(self, config: WorkloadConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)  # noqa: S311 (a reproducible workload, not a secret)
        self.lock = threading.Condition()
        self.issued = 0
        self.in_flight = 0
        self.fresh: Bag[_User] = Bag()
        self.active_free: Bag[_User] = Bag()  # active, nothing but maybe a relink in flight
        self.contended_targets: Bag[_User] = Bag()  # active, a relink in flight, nothing else
        self.relink_free: Bag[_User] = Bag()  # active, no relink in flight
        self.cancelled_free: Bag[_User] = Bag()
        self._bags = (
            self.fresh,
            self.active_free,
            self.contended_targets,
            self.relink_free,
            self.cancelled_free,
        )
        for _ in range(config.users):
            user = _User(f"{config.namespace}{uuid.UUID(int=self.rng.getrandbits(128), version=4)}")
            self.refresh(user)

    def refresh(self, user: _User) -> None:
        for bag in self._bags:
            bag.discard(user)
        if user.state == "fresh" and not user.busy:
            self.fresh.add(user)
        elif user.state == "active":
            if not user.busy:
                self.active_free.add(user)
                if user.relinking:
                    self.contended_targets.add(user)
            if not user.relinking:
                self.relink_free.add(user)
        elif user.state == "cancelled" and not user.busy and not user.relinking:
            self.cancelled_free.add(user)

    def choose(self) -> tuple[Operation, _User] | None:
        eligible = {
            Operation.SIGNUP: len(self.fresh) > 0,
            Operation.CANCEL: len(self.active_free) > 0,
            Operation.REACTIVATE: len(self.cancelled_free) > 0,
            Operation.SECOND_SIGNUP: len(self.active_free) > 0,
            Operation.RELINK: len(self.relink_free) > 0,
        }
        operations = [op for op in Operation if eligible[op] and self.config.mix.weight(op) > 0]
        if not operations:
            return None
        operation = self.rng.choices(operations, weights=[self.config.mix.weight(op) for op in operations])[0]
        if operation is Operation.SIGNUP:
            user = self.fresh.choice(self.rng)
        elif operation is Operation.REACTIVATE:
            user = self.cancelled_free.choice(self.rng)
        elif operation is Operation.RELINK:
            user = self.relink_free.choice(self.rng)
        elif len(self.contended_targets) and self.rng.random() < self.config.contention:
            user = self.contended_targets.choice(self.rng)
        else:
            user = self.active_free.choice(self.rng)
        if operation is Operation.RELINK:
            user.relinking, user.contended = True, user.busy
        else:
            user.busy = True
            if user.relinking:
                user.contended = True
        self.refresh(user)
        return operation, user

    def choose_burst(self) -> tuple[Operation, _User] | None:
        """A user for a same-user burst, taken out of the mix: a fresh one (two signups) or an active
        one with nothing in flight (two second signups)."""
        candidates = [(Operation.SIGNUP, self.fresh), (Operation.SECOND_SIGNUP, self.active_free)]
        candidates = [(op, bag) for op, bag in candidates if len(bag)]
        if not candidates:
            return None
        operation, bag = candidates[self.rng.randrange(len(candidates))]
        user = bag.choice(self.rng)
        if user.relinking:  # a relink beside the burst would make its answers a third request's
            return None
        user.busy = True
        self.refresh(user)
        return operation, user

    def finish_burst(self, operation: Operation, user: _User, statuses: list[int | None]) -> None:
        user.busy = False
        if any(status in (200, 201) for status in statuses):
            user.state = "active"  # one of them won; the others lost (409) or answered the same account
        elif operation is Operation.SECOND_SIGNUP and all(
            status in (409, 503) or status is None for status in statuses
        ):
            pass  # no winner written, or unknown: the user stays as believed
        elif operation is Operation.SIGNUP and all(status == 503 or status is None for status in statuses):
            pass  # not written or unknown: a signup may be tried again
        else:
            user.state = "retired"
        self.refresh(user)

    def finish(self, operation: Operation, user: _User, status: int | None) -> None:
        if operation is Operation.RELINK:
            user.relinking = False
        else:
            user.busy = False
            if status is None or status == 503:
                pass  # unknown or not written: a signup may be tried again, the rest stays as believed
            elif operation is Operation.SIGNUP:
                user.state = "active" if status in (200, 201) else "retired"
            elif operation is Operation.CANCEL:
                user.state = "cancelled" if status == 200 else "retired"
            elif operation is Operation.REACTIVATE:
                user.state = "active" if status == 200 else "retired"
            elif status not in (200, 201):  # a second signup refused
                user.state = "retired"
        self.refresh(user)


def _error_code(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    code = body.get("error") if isinstance(body, dict) else None
    return code if isinstance(code, str) else None


class _Run:
    """One run: the model, the summary and the shared HTTP client of the client threads."""

    def __init__(self, config: WorkloadConfig, client: httpx.Client) -> None:
        self.config = config
        self.model = _Model(config)
        self.client = client
        self.summary = WorkloadSummary(
            seed=config.seed,
            users=config.users,
            clients=config.clients,
            operations_requested=config.operations,
        )
        self.started = time.monotonic()
        self.counts_lock = threading.Lock()

    def take(self) -> tuple[Operation, _User, int] | None:
        model = self.model
        with model.lock:
            while True:
                if model.issued >= self.config.operations:
                    return None
                chosen = model.choose()
                if chosen is not None:
                    index = model.issued
                    model.issued += 1
                    model.in_flight += 1
                    return chosen[0], chosen[1], index
                if model.in_flight == 0:  # nothing can happen any more: count the turn and go on
                    model.issued += 1
                    self.summary.idle += 1
                    continue
                model.lock.wait(1.0)

    def record(self, operation: Operation, user: _User, response: httpx.Response | None) -> None:
        status = response.status_code if response is not None else None
        code = _error_code(response) if response is not None and status not in (200, 201) else None
        with self.model.lock:
            contended = user.contended
            self.model.finish(operation, user, status)
            self.model.in_flight -= 1
            self.model.lock.notify_all()
        summary = self.summary
        with self.counts_lock:
            if response is None:
                summary.transport_errors += 1
                return
            by_status = summary.answers[operation.value]
            by_status[str(status)] = by_status.get(str(status), 0) + 1
            if status == 503:
                summary.unavailable += 1
            if operation is Operation.RELINK:
                summary.relinks_contended += int(contended)
                if status == 200:
                    summary.relinks_linked += 1
                elif status == 404 and code == NOT_ACTIVE:
                    summary.relinks_rejected += 1
            elif operation is Operation.SECOND_SIGNUP and status == 200:
                summary.same_account += 1

    def client_loop(self) -> None:
        while (taken := self.take()) is not None:
            operation, user, index = taken
            if self.config.rate > 0:
                delay = self.started + index / self.config.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            with self.counts_lock:
                self.summary.operations[operation.value] += 1
            try:
                response: httpx.Response | None = self.client.post(f"/{user.user_id}/{_PATHS[operation]}")
            except httpx.HTTPError:
                response = None
            self.record(operation, user, response)

    def burst(self) -> bool:
        """One burst of simultaneous requests for one user; False when no user could be taken."""
        with self.model.lock:
            chosen = self.model.choose_burst()
        if chosen is None:
            return False
        operation, user = chosen
        barrier = threading.Barrier(_BURST_SIZE)
        spans: list[tuple[float, float]] = []
        answers: list[httpx.Response | None] = []
        lock = threading.Lock()

        def send() -> None:
            barrier.wait()
            started = time.monotonic()
            try:
                response: httpx.Response | None = self.client.post(f"/{user.user_id}/{_PATHS[operation]}")
            except httpx.HTTPError:
                response = None
            with lock:
                spans.append((started, time.monotonic()))
                answers.append(response)

        senders = [
            threading.Thread(target=send, name=f"same-user-{i}", daemon=True) for i in range(_BURST_SIZE)
        ]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        statuses = [response.status_code if response is not None else None for response in answers]
        with self.model.lock:
            self.model.finish_burst(operation, user, statuses)
            self.model.lock.notify_all()
        bursts = self.summary.same_user
        assert bursts is not None
        with self.counts_lock:
            bursts.bursts += 1
            bursts.requests += len(answers)
            # Every request started before any had its answer: they were in flight together.
            bursts.overlapped += int(max(start for start, _ in spans) < min(end for _, end in spans))
            by_status = bursts.answers.setdefault(operation.value, {})
            for response in answers:
                status = "transport_error" if response is None else str(response.status_code)
                by_status[status] = by_status.get(status, 0) + 1
                if response is None or response.status_code in (200, 201, 503):
                    continue
                if response.status_code == 409 and _error_code(response) == CONCURRENT_REQUEST:
                    bursts.concurrent_request += 1
                else:
                    bursts.undocumented += 1
        return True

    def burst_loop(self, done: threading.Event) -> None:
        # The first burst goes with the workload's first requests, however short the workload is.
        interval = 1.0 / self.config.concurrent_same_user
        due = time.monotonic()
        while True:
            self.burst()
            due += interval
            if done.wait(max(0.0, due - time.monotonic())):
                return

    def run(self) -> WorkloadSummary:
        threads = [
            threading.Thread(target=self.client_loop, name=f"workload-client-{i}", daemon=True)
            for i in range(self.config.clients)
        ]
        done = threading.Event()
        bursts: threading.Thread | None = None
        if self.config.concurrent_same_user > 0:
            self.summary.same_user = SameUserBursts()
            bursts = threading.Thread(
                target=self.burst_loop, args=(done,), name="same-user-bursts", daemon=True
            )
            bursts.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        if bursts is not None:
            bursts.join()
        try:
            stats = self.client.get("/stats")
            self.summary.service_stats = stats.json() if stats.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            self.summary.service_stats = {}
        return self.summary


def run_service_workload(
    config: WorkloadConfig, base_url: str, *, http: httpx.Client | None = None
) -> WorkloadSummary:
    """Send the workload to the service at `base_url` from `config.clients` threads; return the summary."""
    client = http or httpx.Client(
        base_url=base_url,
        timeout=config.request_timeout_seconds,
        limits=httpx.Limits(max_connections=config.clients * 2, max_keepalive_connections=config.clients * 2),
    )
    try:
        summary = _Run(config, client).run()
    finally:
        if http is None:
            client.close()
    _log.info(
        "service workload finished",
        extra={
            "operations": sum(summary.operations.values()),
            "relinks_rejected": summary.relinks_rejected,
            "clients": config.clients,
            "same_user_bursts": summary.same_user.bursts if summary.same_user is not None else 0,
        },
    )
    return summary

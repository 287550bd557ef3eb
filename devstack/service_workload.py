"""The workload through the entitlements service: the mix as HTTP requests from N concurrent clients.

`entitlements simulate --clients N` (and the race test) drive the service's routes (`service.app`):

    POST /{user_id}/signup, /cancellation, /reactivation, /array-signup, /processor

The mix's weights (`devstack.simulator.Mix`) pick each next operation from a seeded generator, under
three rules that keep the workload to what real users do:

- each user signs up once, and nothing else happens to a user before their signup has answered;
- at most one request other than a relink is in flight per user (so at most one second signup);
- a relink (`POST /{user_id}/processor`) may be in flight beside one of them: `contention` is the share
  of cancellations and second signups aimed at users with a relink in flight, so the race the service
  design guards against (docs/table.md: a link holding a row across its two network calls while the row
  is retired or cancelled) happens by itself.
  With SaveIfActive the service answers such a link 404 (`entitlement_not_active`), terminal.

Which interleavings happen is left to the threads (the fakes' latency widens the window); the demo forces
them instead, through the fakes' hooks. The choices are seeded; the timing is not.

The summary counts requests and answers by operation and status (never ids); the service's own counts
(`GET /stats`) are fetched at the end. Logs hold counts only.
"""

from __future__ import annotations

__all__ = ["WorkloadConfig", "WorkloadSummary", "run_service_workload"]

import logging
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from devstack.simulator import Mix, Operation, PlantedFault, _Bag

_log = logging.getLogger(__name__)

_PATHS = {
    Operation.SIGNUP: "signup",
    Operation.CANCEL: "cancellation",
    Operation.REACTIVATE: "reactivation",
    Operation.SECOND_SIGNUP: "array-signup",
    Operation.RELINK: "processor",
}
NOT_ACTIVE = "entitlement_not_active"


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
    # Prefixed to every user id: runs in one process share moto's state, so each run names its own users.
    namespace: str = ""

    def __post_init__(self) -> None:
        if self.users < 1 or self.clients < 1:
            raise ValueError("users and clients must be at least 1")
        if self.operations < 0 or self.rate < 0:
            raise ValueError("operations and rate must be non-negative")
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
        return out


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
        self.fresh: _Bag[_User] = _Bag()
        self.active_free: _Bag[_User] = _Bag()  # active, nothing but maybe a relink in flight
        self.contended_targets: _Bag[_User] = _Bag()  # active, a relink in flight, nothing else
        self.relink_free: _Bag[_User] = _Bag()  # active, no relink in flight
        self.cancelled_free: _Bag[_User] = _Bag()
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

    def run(self) -> WorkloadSummary:
        threads = [
            threading.Thread(target=self.client_loop, name=f"workload-client-{i}", daemon=True)
            for i in range(self.config.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
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
        },
    )
    return summary

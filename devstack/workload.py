"""What a simulated run is asked to do and what it answers: the operations and their mix, a run's
configuration and summary, the entitlements service as a run drives it (`EntitlementOperations`, handed
over by the composition root, so that devstack imports no `service`), and `Bag`, the seeded set both
workloads draw users from. The state machine that runs it is `devstack.simulator`; the concurrent
clients over HTTP are `devstack.service_workload`."""

from __future__ import annotations

__all__ = [
    "Answered",
    "Bag",
    "EntitlementOperations",
    "Mix",
    "Operation",
    "OperationAnswer",
    "SimulationConfig",
    "SimulationSummary",
]

import random
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from devstack.planted_faults import FaultKind, PlantedFault

_T = TypeVar("_T")


class OperationAnswer(StrEnum):
    """What the service answered one operation, as the simulator needs to know it."""

    DONE = "done"
    REFUSED = "refused"  # a state rule (unknown user, wrong state, Array or transactions refusing)
    NOT_ACTIVE = "not_active"  # a link refused by SaveIfActive (ErrEntitlementNotActive): terminal
    CONCURRENT = "concurrent_request"  # lost to a concurrent request of the same user (409)
    UNAVAILABLE = "unavailable"  # a downstream call kept failing (503): nothing known to be written


@dataclass(frozen=True, slots=True)
class Answered:
    answer: OperationAnswer
    account: str | None = None  # the Array account the user's Active row names after the write


class EntitlementOperations(Protocol):
    """The entitlements service as the simulator drives it: its write paths and arraylink, in this
    process. The entry points hand it over (`entitlements._workload.in_process_service`), so that
    devstack imports no `service`."""

    def signup(self, user_id: str) -> Answered: ...
    def cancel(self, user_id: str) -> Answered: ...
    def reactivate(self, user_id: str) -> Answered: ...
    def second_signup(self, user_id: str) -> Answered: ...
    def relink(self, user_id: str) -> Answered: ...


class Operation(StrEnum):
    SIGNUP = "signup"
    CANCEL = "cancel"
    REACTIVATE = "reactivate"
    SECOND_SIGNUP = "second_signup"
    RELINK = "relink"


@dataclass(frozen=True, slots=True)
class Mix:
    """Relative weights of the operations."""

    signup: float = 3.0
    cancel: float = 1.0
    reactivate: float = 0.5
    second_signup: float = 1.0
    relink: float = 4.0

    def __post_init__(self) -> None:
        weights = [self.weight(op) for op in Operation]
        if any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError("mix weights must be non-negative and not all zero")

    def weight(self, operation: Operation) -> float:
        value: float = getattr(self, operation.value)
        return value


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    table_name: str
    cleanup_ttl_days: int = 63  # CLEANUP_TTL_DAYS (config.PolicySettings owns the value)
    stale_entitlement_ttl_days: int = 1  # STALE_ENTITLEMENT_TTL_DAYS
    users: int = 50
    operations: int = 200
    rate: float = 0.0  # operations per second; 0 is as fast as the table answers
    mix: Mix = field(default_factory=Mix)
    seed: int = 0
    faults: bool = False
    faults_per_kind: int = 1
    max_relink_window: int = 3
    contention: float = 0.5

    def __post_init__(self) -> None:
        if self.users < 1:
            raise ValueError("users must be at least 1")
        if self.operations < 0 or self.faults_per_kind < 0 or self.max_relink_window < 0:
            raise ValueError("operations, faults_per_kind and max_relink_window must be non-negative")
        if self.rate < 0:
            raise ValueError("rate must be non-negative")
        if not 0.0 <= self.contention <= 1.0:
            raise ValueError("contention must be between 0 and 1")
        if self.cleanup_ttl_days < 1 or self.stale_entitlement_ttl_days < 1:
            raise ValueError("ttl days must be at least 1")


@dataclass(slots=True)
class SimulationSummary:
    seed: int
    users: int
    operations_requested: int
    operations: dict[str, int] = field(default_factory=lambda: {op.value: 0 for op in Operation})
    relinks_saved: int = 0
    relink_rows_missing: int = 0
    guard_rejections: int = 0  # SaveIfActive refusals (ErrEntitlementNotActive)
    refused: dict[str, int] = field(default_factory=dict)  # transactions whose conditions failed
    idle: int = 0  # turns with no eligible operation
    faults: dict[str, int] = field(default_factory=lambda: {kind.value: 0 for kind in FaultKind})
    planted_faults: list[PlantedFault] = field(default_factory=list)
    writes: int = 0
    first_business_time: str | None = None
    last_business_time: str | None = None
    # "service": the mix went through the service's own code; "table": direct writes (the bench's capture)
    mode: str = "table"

    def to_json(self, *, include_keys: bool = False) -> dict[str, Any]:
        """The summary as JSON-ready data. Item keys and canary tokens only with `include_keys`."""
        return {
            "mode": self.mode,
            "seed": self.seed,
            "users": self.users,
            "operations_requested": self.operations_requested,
            "operations": dict(self.operations),
            "relinks_saved": self.relinks_saved,
            "relink_rows_missing": self.relink_rows_missing,
            "guard_rejections": self.guard_rejections,
            "refused": dict(sorted(self.refused.items())),
            "idle": self.idle,
            "faults": dict(self.faults),
            "planted_faults": [f.to_json(include_keys=include_keys) for f in self.planted_faults],
            "writes": self.writes,
            "first_business_time": self.first_business_time,
            "last_business_time": self.last_business_time,
        }


class Bag(Generic[_T]):
    """A set with O(1) add/remove and seeded uniform choice; order depends only on the call sequence."""

    def __init__(self) -> None:
        self._items: list[_T] = []
        self._index: dict[_T, int] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item: object) -> bool:
        return item in self._index

    def add(self, item: _T) -> None:
        if item not in self._index:
            self._index[item] = len(self._items)
            self._items.append(item)

    def discard(self, item: _T) -> None:
        position = self._index.pop(item, None)
        if position is None:
            return
        last = self._items.pop()
        if position < len(self._items):
            self._items[position] = last
            self._index[last] = position

    def choice(self, rng: random.Random) -> _T:
        return self._items[rng.randrange(len(self._items))]

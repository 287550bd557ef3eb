"""The workload simulator: the entitlement service's documented writes, at a chosen rate and mix.

Every write goes through the table contract (`schema.table`) as the service design describes it
(docs/table.md, "The service's write paths"):

- signup: one unconditional put of a fresh Active row carrying a processorToken;
- cancellation: the row Cancelled + the cancellation cleanup record on the user's single cancellation key,
  naming the account, ttl = now + CLEANUP_TTL_DAYS (epoch seconds), in one TransactWriteItems;
- reactivation: delete of the cancellation record + the row Active again, in one transaction;
- second Array signup: a new Active row for a new Array account, the old row Superseded, and a stale
  cleanup record on the key ending in the OLD account id, ttl = now + STALE_ENTITLEMENT_TTL_DAYS, in one
  transaction;
- relink: read a row, wait (the link's two network calls, to transactions-service and to Array:
  service/arraylink.py), then put back exactly the image read through SaveIfActive, a put conditioned
  on `attribute_exists(pk) AND #status = :active`. A rejection is
  ErrEntitlementNotActive (`EntitlementNotActiveError`): terminal, counted, never retried. The wait is
  modelled deterministically: a relink's write happens after 0..`max_relink_window` further operations, so
  a cancellation or second signup of the same user in between makes the guard reject it, as in
  production. `contention` steers that many cancellations and second signups onto users mid-relink.

The transactions carry conditions (the row must be in the state the write moves it from; the
cancellation record must still exist to be deleted) so that the simulator never makes an anomaly other
than the ones it plants; a refused transaction is counted, never retried, and its user is left alone.

Business timestamps (createdAt/updatedAt) and every ttl come from the shared clock (`pipeline.clock`), so
with a simulated clock 63 days pass in seconds while each ttl stays real epoch arithmetic on simulated time.

`faults=True` plants, each `faults_per_kind` times, on dedicated users that the mix then leaves alone:

- `stale_put_race`: the race SaveIfActive guards against. A relink reads an Active row, a second signup
  supersedes it, then the relink writes the stale image back unconditionally: the user has two Active
  rows and a stale cleanup record naming an account in use;
- `failed_reactivation_delete`: a reactivation whose delete of the cancellation record failed: the row is
  Active and the cancellation record is left behind;
- `string_ttl`: a cancellation whose record's ttl is a string (DynamoDB never expires it);
- `millisecond_ttl`: a second signup whose stale record's ttl is in milliseconds (never expires);
- `token_canary`: a signup (and a relink of it) with a distinctive processor token the lake must never hold.

The run is deterministic for a seed (given the same table state). The summary counts operations, guard
rejections, refusals and planted faults; only `SimulationSummary.to_json(include_keys=True)` (written to a
file on request) holds the planted faults' item keys and canary tokens. Logs hold counts only.
"""

from __future__ import annotations

__all__ = [
    "CANARY_TOKEN_PREFIX",
    "DynamoDBWriteClient",
    "EntitlementNotActiveError",
    "EntitlementTable",
    "ErrEntitlementNotActive",
    "FaultKind",
    "Mix",
    "Operation",
    "PlantedFault",
    "PlantedItem",
    "SimulationConfig",
    "SimulationSummary",
    "TransactionRefused",
    "plant_faults",
    "run_simulation",
]

import logging
import random
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar, cast

from botocore.exceptions import ClientError
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from devstack import _writes as writes
from pipeline.clock import Clock
from schema.aws_errors import RETRYABLE_CANCELLATION_CODES, aws_error_code, cancellation_codes, converted
from schema.errors import RetryableError, TerminalError
from schema.table import EntitlementStatus, cancellation_key, entitlement_key, stale_key

_log = logging.getLogger(__name__)

CANARY_TOKEN_PREFIX = "PTOK-CANARY-"  # noqa: S105  (a marker to search for, not a secret)
_TOKEN_PREFIX = "ptok-"  # noqa: S105


class Operation(StrEnum):
    SIGNUP = "signup"
    CANCEL = "cancel"
    REACTIVATE = "reactivate"
    SECOND_SIGNUP = "second_signup"
    RELINK = "relink"


class FaultKind(StrEnum):
    STALE_PUT_RACE = "stale_put_race"
    FAILED_REACTIVATION_DELETE = "failed_reactivation_delete"
    STRING_TTL = "string_ttl"
    MILLISECOND_TTL = "millisecond_ttl"
    TOKEN_CANARY = "token_canary"  # noqa: S105  (a fault kind, not a secret)


class EntitlementNotActiveError(TerminalError):
    """arraylink.ErrEntitlementNotActive: SaveIfActive refused the write (the row is gone or not Active).
    Terminal on both paths: recorded, never retried."""


ErrEntitlementNotActive = EntitlementNotActiveError


class TransactionRefused(TerminalError):
    """A transaction's condition was not met (the table is not in the state the write moves it from)."""

    def __init__(self, message: str, codes: list[str]) -> None:
        super().__init__(message)
        self.codes = codes


# ---------------------------------------------------------------------------------------------------
# The thin boto3 edge


class DynamoDBWriteClient(Protocol):
    """The data-plane calls the simulator makes (a boto3 `dynamodb` client has them)."""

    def get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def put_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def update_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]: ...


class EntitlementTable:
    """The entitlements table as the simulated service writes it. Transient failures (throttling, 5xx,
    connection errors) are retried with backoff; refusals never are."""

    def __init__(
        self,
        client: DynamoDBWriteClient,
        table_name: str,
        *,
        attempts: int = 4,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self.table_name = table_name
        self._attempts = attempts
        self._sleep = sleep
        self.writes = 0

    def _retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type(RetryableError),
            stop=stop_after_attempt(self._attempts),
            wait=wait_exponential(multiplier=0.05, max=2.0),
            sleep=self._sleep,
            reraise=True,
        )

    def get_row(self, user_id: str, array_account_id: str) -> writes.LowLevelItem | None:
        """The row's full low-level image (strongly consistent), or None."""
        request = writes.get_row(self.table_name, user_id, array_account_id)
        for attempt in self._retrying():
            with attempt, converted("DynamoDB GetItem"):
                item: writes.LowLevelItem | None = self._client.get_item(**request).get("Item")
                return item
        raise AssertionError("unreachable")  # pragma: no cover

    def put(self, item: writes.LowLevelItem) -> None:
        """An unconditional whole-item put (signup; or the stale write of a planted race)."""
        request = writes.unconditional_put(self.table_name, item)
        for attempt in self._retrying():
            with attempt, converted("DynamoDB PutItem"):
                self._client.put_item(**request)
        self.writes += 1

    def save_if_active(self, image: writes.LowLevelItem) -> None:
        """dynamo.SaveIfActive: put back exactly `image` only if the row exists and is Active.
        Raises EntitlementNotActiveError (terminal) when refused."""
        request = writes.save_if_active(self.table_name, image)
        for attempt in self._retrying():
            with attempt:
                try:
                    self._client.put_item(**request)
                except ClientError as error:
                    if aws_error_code(error) == "ConditionalCheckFailedException":
                        raise EntitlementNotActiveError("entitlement row is not active") from None
                    with converted("DynamoDB PutItem"):
                        raise
        self.writes += 1

    def update(self, request: dict[str, Any]) -> None:
        for attempt in self._retrying():
            with attempt:
                try:
                    self._client.update_item(**request)
                except ClientError as error:
                    if aws_error_code(error) == "ConditionalCheckFailedException":
                        raise TransactionRefused("update refused", ["ConditionalCheckFailed"]) from None
                    with converted("DynamoDB UpdateItem"):
                        raise
        self.writes += 1

    def transact(self, items: list[dict[str, Any]]) -> None:
        """One TransactWriteItems. Raises TransactionRefused when a condition fails."""
        for attempt in self._retrying():
            with attempt:
                try:
                    self._client.transact_write_items(TransactItems=items)
                except ClientError as error:
                    codes = cancellation_codes(error)
                    failed = {c for c in codes if c not in ("None", "")}
                    if aws_error_code(error) == "TransactionCanceledException":
                        if failed <= {"ConditionalCheckFailed"}:
                            raise TransactionRefused("transaction refused", codes) from None
                        if failed & RETRYABLE_CANCELLATION_CODES:
                            raise RetryableError("DynamoDB TransactWriteItems cancelled: conflict") from None
                    with converted("DynamoDB TransactWriteItems"):
                        raise
        self.writes += 1


# ---------------------------------------------------------------------------------------------------
# Configuration and results


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


@dataclass(frozen=True, slots=True)
class PlantedItem:
    role: str
    pk: str
    sk: str


@dataclass(frozen=True, slots=True)
class PlantedFault:
    fault_id: str
    kind: FaultKind
    items: tuple[PlantedItem, ...]
    array_account_id: str  # the account the fault concerns (in use, or named by a malformed record)
    processor_token: str | None = None  # canaries only
    user_id: str = ""  # the fault's own user (every item's pk is theirs)

    def to_json(self, *, include_keys: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"fault_id": self.fault_id, "kind": self.kind.value}
        if include_keys:
            out["items"] = [{"role": i.role, "pk": i.pk, "sk": i.sk} for i in self.items]
            out["user_id"] = self.user_id
            out["array_account_id"] = self.array_account_id
            if self.processor_token is not None:
                out["processor_token"] = self.processor_token
        return out


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

    def to_json(self, *, include_keys: bool = False) -> dict[str, Any]:
        """The summary as JSON-ready data. Item keys and canary tokens only with `include_keys`."""
        return {
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


# ---------------------------------------------------------------------------------------------------
# The pure core: a seeded model of the users, deciding what to do next

_T = TypeVar("_T")


class _Bag(Generic[_T]):
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


@dataclass(slots=True, eq=False)
class _User:
    user_id: str
    accounts: list[str] = field(default_factory=list)
    active: str | None = None  # the account believed Active
    cancelled: str | None = None  # the account believed Cancelled, with its cancellation record alive
    cancellation_ttl: int = 0


@dataclass(slots=True)
class _PendingRelink:
    due: int
    user: _User
    image: writes.LowLevelItem


def _new_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


class _Simulation:
    def __init__(
        self,
        config: SimulationConfig,
        table: EntitlementTable,
        clock: Clock,
        sleep: Callable[[float], None],
        monotonic: Callable[[], float],
    ) -> None:
        self.config = config
        self.table = table
        self.clock = clock
        self.sleep = sleep
        self.monotonic = monotonic
        self.progress: Callable[[int, int], None] | None = None  # (done, total) operations: a CLI's bar
        # Seeded for reproducible workloads (not for secrets); faults draw from their own stream so that
        # planting them leaves the mix's choices unchanged.
        self.rng = random.Random(config.seed)  # noqa: S311
        self.fault_rng = random.Random(f"{config.seed}/faults")  # noqa: S311
        self.summary = SimulationSummary(
            seed=config.seed, users=config.users, operations_requested=config.operations
        )
        self.fresh: _Bag[_User] = _Bag()
        self.active: _Bag[_User] = _Bag()
        self.relinkable: _Bag[_User] = _Bag()
        self.relinking: _Bag[_User] = _Bag()
        self.cancelled: _Bag[_User] = _Bag()
        self.pending: list[_PendingRelink] = []
        for _ in range(config.users):
            self.fresh.add(_User(_new_id(self.rng)))

    # -- time ---------------------------------------------------------------------------------------

    def now(self) -> Any:
        now = self.clock.now()
        stamp = writes.business_time(now)
        if self.summary.first_business_time is None:
            self.summary.first_business_time = stamp
        self.summary.last_business_time = stamp
        return now

    def pace(self, index: int, started: float) -> None:
        if self.config.rate <= 0:
            return
        delay = started + index / self.config.rate - self.monotonic()
        if delay > 0:
            self.sleep(delay)

    # -- model bookkeeping --------------------------------------------------------------------------

    def set_active(self, user: _User, account: str) -> None:
        user.active = account
        self.active.add(user)
        if user not in self.relinking:
            self.relinkable.add(user)

    def clear_active(self, user: _User) -> None:
        user.active = None
        self.active.discard(user)
        self.relinkable.discard(user)

    def retire(self, user: _User) -> None:
        """After a refusal the model no longer knows this user's state: leave the user alone."""
        self.clear_active(user)
        self.cancelled.discard(user)
        user.cancelled = None

    def refused(self, operation: Operation) -> None:
        self.summary.refused[operation.value] = self.summary.refused.get(operation.value, 0) + 1

    # -- choosing -----------------------------------------------------------------------------------

    def reactivatable(self) -> _User | None:
        """A cancelled user whose cancellation record has not expired yet (by the shared clock)."""
        now_epoch = int(self.clock.now().timestamp())
        while len(self.cancelled):
            user = self.cancelled.choice(self.rng)
            if user.cancellation_ttl > now_epoch:
                return user
            self.cancelled.discard(user)  # its record has expired: cleanup owns the user now
            user.cancelled = None
        return None

    def contended(self) -> _User:
        """An active user, often one mid-relink so the relink's guard has something to refuse."""
        if len(self.relinking) and self.rng.random() < self.config.contention:
            candidate = self.relinking.choice(self.rng)
            if candidate in self.active:
                return candidate
        return self.active.choice(self.rng)

    def choose(self) -> tuple[Operation, _User] | None:
        reactivation_candidate = self.reactivatable() if len(self.cancelled) else None
        eligible = {
            Operation.SIGNUP: len(self.fresh) > 0,
            Operation.CANCEL: len(self.active) > 0,
            Operation.REACTIVATE: reactivation_candidate is not None,
            Operation.SECOND_SIGNUP: len(self.active) > 0,
            Operation.RELINK: len(self.relinkable) > 0,
        }
        operations = [op for op in Operation if eligible[op] and self.config.mix.weight(op) > 0]
        if not operations:
            return None
        operation = self.rng.choices(operations, weights=[self.config.mix.weight(op) for op in operations])[0]
        if operation is Operation.SIGNUP:
            return operation, self.fresh.choice(self.rng)
        if operation is Operation.REACTIVATE:
            assert reactivation_candidate is not None
            return operation, reactivation_candidate
        if operation is Operation.RELINK:
            return operation, self.relinkable.choice(self.rng)
        return operation, self.contended()

    # -- the operations -----------------------------------------------------------------------------

    def new_token(self, rng: random.Random, *, canary: bool = False) -> str:
        prefix = CANARY_TOKEN_PREFIX if canary else _TOKEN_PREFIX
        return f"{prefix}{rng.getrandbits(128):032x}"

    def signup(self, user: _User) -> None:
        self.fresh.discard(user)
        account = _new_id(self.rng)
        row = writes.entitlement_row(
            user.user_id,
            account,
            status=EntitlementStatus.ACTIVE,
            processor_token=self.new_token(self.rng),
            now=self.now(),
        )
        self.table.put(row)
        user.accounts.append(account)
        self.set_active(user, account)

    def cancel(self, user: _User) -> None:
        assert user.active is not None
        account = user.active
        now = self.now()
        ttl = writes.ttl_after(now, self.config.cleanup_ttl_days)
        try:
            self.table.transact(
                writes.cancellation_transaction(
                    self.table.table_name, user.user_id, account, ttl={"N": str(ttl)}, now=now
                )
            )
        except TransactionRefused:
            self.refused(Operation.CANCEL)
            self.retire(user)
            return
        self.clear_active(user)
        user.cancelled = account
        user.cancellation_ttl = ttl
        self.cancelled.add(user)

    def reactivate(self, user: _User) -> None:
        assert user.cancelled is not None
        account = user.cancelled
        try:
            self.table.transact(
                writes.reactivation_transaction(self.table.table_name, user.user_id, account, now=self.now())
            )
        except TransactionRefused:
            self.refused(Operation.REACTIVATE)
            self.retire(user)
            return
        self.cancelled.discard(user)
        user.cancelled = None
        self.set_active(user, account)

    def second_signup(self, user: _User) -> None:
        assert user.active is not None
        old = user.active
        new = _new_id(self.rng)
        now = self.now()
        row = writes.entitlement_row(
            user.user_id,
            new,
            status=EntitlementStatus.ACTIVE,
            processor_token=self.new_token(self.rng),
            now=now,
        )
        stale_ttl = writes.ttl_after(now, self.config.stale_entitlement_ttl_days)
        try:
            self.table.transact(
                writes.second_signup_transaction(
                    self.table.table_name,
                    user.user_id,
                    old_array_account_id=old,
                    new_row=row,
                    stale_ttl={"N": str(stale_ttl)},
                    now=now,
                )
            )
        except TransactionRefused:
            self.refused(Operation.SECOND_SIGNUP)
            self.retire(user)
            return
        user.accounts.append(new)
        self.set_active(user, new)

    def begin_relink(self, user: _User, index: int) -> None:
        assert user.active is not None
        image = self.table.get_row(user.user_id, user.active)
        if image is None:
            self.summary.relink_rows_missing += 1
            return
        window = self.rng.randint(0, self.config.max_relink_window)
        self.relinkable.discard(user)
        self.relinking.add(user)
        self.pending.append(_PendingRelink(due=index + 1 + window, user=user, image=image))

    def complete_relinks(self, up_to: int | None) -> None:
        due = [p for p in self.pending if up_to is None or p.due <= up_to]
        if not due:
            return
        self.pending = [p for p in self.pending if not (up_to is None or p.due <= up_to)]
        for relink in due:
            try:
                self.table.save_if_active(relink.image)
            except EntitlementNotActiveError:
                self.summary.guard_rejections += 1  # terminal: recorded, never retried
            else:
                self.summary.relinks_saved += 1
            user = relink.user
            self.relinking.discard(user)
            if user in self.active:
                self.relinkable.add(user)

    def perform(self, operation: Operation, user: _User, index: int) -> None:
        self.summary.operations[operation.value] += 1
        if operation is Operation.SIGNUP:
            self.signup(user)
        elif operation is Operation.CANCEL:
            self.cancel(user)
        elif operation is Operation.REACTIVATE:
            self.reactivate(user)
        elif operation is Operation.SECOND_SIGNUP:
            self.second_signup(user)
        else:
            self.begin_relink(user, index)

    # -- planted faults -----------------------------------------------------------------------------

    def fault_schedule(self) -> dict[int, list[FaultKind]]:
        schedule: dict[int, list[FaultKind]] = {}
        if not self.config.faults:
            return schedule
        for kind in FaultKind:
            for _ in range(self.config.faults_per_kind):
                position = self.fault_rng.randint(0, self.config.operations)
                schedule.setdefault(position, []).append(kind)
        return schedule

    def plant(self, kind: FaultKind, *, namespace: str = "") -> None:
        rng = self.fault_rng
        fault_id = f"F{len(self.summary.planted_faults) + 1:03d}"
        user_id = f"{namespace}{_new_id(rng)}"
        account = _new_id(rng)
        token = self.new_token(rng, canary=kind is FaultKind.TOKEN_CANARY)
        name = self.table.table_name
        now = self.now()
        row = writes.entitlement_row(
            user_id, account, status=EntitlementStatus.ACTIVE, processor_token=token, now=now
        )
        self.table.put(row)  # every fault starts from an ordinary signup on its own user
        row_key = entitlement_key(user_id, account)
        items: list[PlantedItem] = [PlantedItem("row", row_key["pk"], row_key["sk"])]
        planted_token: str | None = None

        if kind is FaultKind.TOKEN_CANARY:
            image = self.table.get_row(user_id, account)
            assert image is not None
            self.table.save_if_active(image)  # a relink (its unchanged put writes no stream record)
            planted_token = token
        elif kind is FaultKind.STRING_TTL:
            ttl = writes.ttl_after(now, self.config.cleanup_ttl_days)
            self.table.transact(
                writes.cancellation_transaction(name, user_id, account, ttl={"S": str(ttl)}, now=now)
            )
            key = cancellation_key(user_id)
            items.append(PlantedItem("cancellation_record_string_ttl", key["pk"], key["sk"]))
        elif kind is FaultKind.FAILED_REACTIVATION_DELETE:
            ttl = writes.ttl_after(now, self.config.cleanup_ttl_days)
            self.table.transact(
                writes.cancellation_transaction(name, user_id, account, ttl={"N": str(ttl)}, now=now)
            )
            self.table.update(writes.mark_active(name, user_id, account, now=self.now()))
            key = cancellation_key(user_id)
            items.append(PlantedItem("cancellation_record_left_behind", key["pk"], key["sk"]))
        else:  # the two faults made by a second signup
            stale_image = self.table.get_row(user_id, account) if kind is FaultKind.STALE_PUT_RACE else None
            new_account = _new_id(rng)
            new_row = writes.entitlement_row(
                user_id,
                new_account,
                status=EntitlementStatus.ACTIVE,
                processor_token=self.new_token(rng),
                now=now,
            )
            ttl_seconds = writes.ttl_after(now, self.config.stale_entitlement_ttl_days)
            ttl_value = ttl_seconds * 1000 if kind is FaultKind.MILLISECOND_TTL else ttl_seconds
            self.table.transact(
                writes.second_signup_transaction(
                    name,
                    user_id,
                    old_array_account_id=account,
                    new_row=new_row,
                    stale_ttl={"N": str(ttl_value)},
                    now=now,
                )
            )
            new_key = entitlement_key(user_id, new_account)
            items.append(PlantedItem("new_row", new_key["pk"], new_key["sk"]))
            key = stale_key(user_id, account)
            if kind is FaultKind.STALE_PUT_RACE:
                assert stale_image is not None
                self.table.put(stale_image)  # the unguarded write SaveIfActive exists to refuse
                items[0] = PlantedItem("resurrected_row", row_key["pk"], row_key["sk"])
                items.append(PlantedItem("stale_record_naming_account_in_use", key["pk"], key["sk"]))
            else:
                items.append(PlantedItem("stale_record_millisecond_ttl", key["pk"], key["sk"]))

        self.summary.faults[kind.value] += 1
        self.summary.planted_faults.append(
            PlantedFault(
                fault_id=fault_id,
                kind=kind,
                items=tuple(items),
                array_account_id=account,
                processor_token=planted_token,
                user_id=user_id,
            )
        )

    # -- the run ------------------------------------------------------------------------------------

    def run(self) -> SimulationSummary:
        schedule = self.fault_schedule()
        started = self.monotonic()
        for index in range(self.config.operations):
            if self.progress is not None:
                self.progress(index, self.config.operations)
            self.pace(index, started)
            for kind in schedule.get(index, []):
                self.plant(kind)
            self.complete_relinks(index)
            chosen = self.choose()
            if chosen is None:
                self.summary.idle += 1
                continue
            self.perform(chosen[0], chosen[1], index)
        for kind in schedule.get(self.config.operations, []):
            self.plant(kind)
        self.complete_relinks(None)
        self.summary.writes = self.table.writes
        _log.info(
            "simulation finished",
            extra={
                "operations": sum(self.summary.operations.values()),
                "guard_rejections": self.summary.guard_rejections,
                "faults": sum(self.summary.faults.values()),
            },
        )
        return self.summary


def run_simulation(
    config: SimulationConfig,
    table: EntitlementTable,
    clock: Clock,
    *,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationSummary:
    """Run the workload against `table` and return its summary; `progress(done, total)` is called before
    each operation and at the end."""
    simulation = _Simulation(config, table, clock, sleep, monotonic)
    simulation.progress = progress
    summary = simulation.run()
    if progress is not None:
        progress(config.operations, config.operations)
    return summary


class _UnwrittenTable:
    """Takes a planted fault's writes and sends none (a suppressed fault): reads answer what was put."""

    def __init__(self, table_name: str) -> None:
        self.table_name = table_name
        self.writes = 0
        self._rows: dict[tuple[str, str], writes.LowLevelItem] = {}

    def get_row(self, user_id: str, array_account_id: str) -> writes.LowLevelItem | None:
        key = entitlement_key(user_id, array_account_id)
        return self._rows.get((key["pk"], key["sk"]))

    def put(self, item: writes.LowLevelItem) -> None:
        self._rows[(item["pk"]["S"], item["sk"]["S"])] = item

    def save_if_active(self, image: writes.LowLevelItem) -> None:
        self.put(image)

    def update(self, request: dict[str, Any]) -> None:
        return None

    def transact(self, items: list[dict[str, Any]]) -> None:
        return None


def plant_faults(
    config: SimulationConfig,
    table: EntitlementTable,
    clock: Clock,
    kinds: tuple[FaultKind, ...],
    *,
    namespace: str = "",
    unwritten: Collection[FaultKind] = (),
) -> list[PlantedFault]:
    """Plant `config.faults_per_kind` of each of `kinds` by direct table writes, each on its own user
    (the anomalies a workload through the service cannot produce: a string or millisecond ttl, a failed
    reactivation delete, a canary token in a row). User ids start with `namespace`.

    A kind in `unwritten` is described exactly as if planted (same ids, same items) but none of its
    writes is sent: a demo checking its own verdict plants a fault the audits cannot find."""
    simulation = _Simulation(config, table, clock, time.sleep, time.monotonic)
    for kind in kinds:
        for _ in range(config.faults_per_kind):
            if kind in unwritten:
                simulation.table = cast(EntitlementTable, _UnwrittenTable(table.table_name))
            simulation.plant(kind, namespace=namespace)
            simulation.table = table
    return list(simulation.summary.planted_faults)

"""The workload simulator's state machine: the entitlement service's documented writes, at a chosen rate
and mix (`devstack.workload`: the operations, the mix, the configuration and the summary), as a seeded
model of the users.

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

Business timestamps (createdAt/updatedAt) and every ttl come from the shared clock (`schema.clock`), so
with a simulated clock 63 days pass in seconds while each ttl stays real epoch arithmetic on simulated time.

`faults=True` plants, each `faults_per_kind` times, the anomalies of `devstack.planted_faults` on
dedicated users that the mix then leaves alone.

Every write here is a direct one (`devstack.direct_writes`), not the service's: this is the table-only
workload (`entitlements simulate` without `--clients`; the bench's record capture). The service's own
path is driven over HTTP by `devstack.service_workload`.

The run is deterministic for a seed (given the same table state). The summary counts operations, guard
rejections, refusals and planted faults; only `SimulationSummary.to_json(include_keys=True)` (written to a
file on request) holds the planted faults' item keys and canary tokens. Logs hold counts only.
"""

from __future__ import annotations

__all__ = ["run_simulation"]

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devstack import _writes as writes
from devstack.direct_writes import DirectWriteRefused, DirectWrites, NotActiveRefused
from devstack.planted_faults import FaultKind, FaultPlanter, new_id, new_token
from devstack.workload import (
    Answered,
    Bag,
    EntitlementOperations,
    Operation,
    OperationAnswer,
    SimulationConfig,
    SimulationSummary,
)
from schema.clock import Clock
from schema.table import EntitlementStatus

_log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------
# The pure core: a seeded model of the users, deciding what to do next


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


class _Simulation:
    def __init__(
        self,
        config: SimulationConfig,
        table: DirectWrites,
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
        self.fresh: Bag[_User] = Bag()
        self.active: Bag[_User] = Bag()
        self.relinkable: Bag[_User] = Bag()
        self.relinking: Bag[_User] = Bag()
        self.cancelled: Bag[_User] = Bag()
        self.pending: list[_PendingRelink] = []
        self.planter = FaultPlanter(config, table, self.fault_rng, self.now)
        for _ in range(config.users):
            self.fresh.add(_User(new_id(self.rng)))

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

    def signup(self, user: _User) -> None:
        self.fresh.discard(user)
        account = new_id(self.rng)
        row = writes.entitlement_row(
            user.user_id,
            account,
            status=EntitlementStatus.ACTIVE,
            processor_token=new_token(self.rng),
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
        except DirectWriteRefused:
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
        except DirectWriteRefused:
            self.refused(Operation.REACTIVATE)
            self.retire(user)
            return
        self.cancelled.discard(user)
        user.cancelled = None
        self.set_active(user, account)

    def second_signup(self, user: _User) -> None:
        assert user.active is not None
        old = user.active
        new = new_id(self.rng)
        now = self.now()
        row = writes.entitlement_row(
            user.user_id,
            new,
            status=EntitlementStatus.ACTIVE,
            processor_token=new_token(self.rng),
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
        except DirectWriteRefused:
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
            except NotActiveRefused:
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

    def plant(self, kind: FaultKind) -> None:
        fault = self.planter.plant(kind)
        self.summary.faults[kind.value] += 1
        self.summary.planted_faults.append(fault)

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


class _ThroughTheService(_Simulation):
    """The same state machine, each operation sent to the service (`EntitlementOperations`) instead of
    written: the service's own code decides and writes. A relink runs whole when chosen (the service
    holds its row across its two network calls itself), so nothing is pending between operations; races
    with it come from concurrent requests (`devstack.service_workload`), not from this sequence."""

    def __init__(
        self,
        config: SimulationConfig,
        table: DirectWrites,
        clock: Clock,
        sleep: Callable[[float], None],
        monotonic: Callable[[], float],
        *,
        service: EntitlementOperations,
    ) -> None:
        super().__init__(config, table, clock, sleep, monotonic)
        self.service = service
        self.summary.mode = "service"

    def answered(self, operation: Operation, user: _User, answered: Answered) -> bool:
        """True when the write took; otherwise the refusal is counted and the user left alone."""
        if answered.answer is OperationAnswer.DONE:
            return True
        self.refused(operation)
        self.retire(user)
        return False

    def signup(self, user: _User) -> None:
        self.fresh.discard(user)
        self.now()
        answered = self.service.signup(user.user_id)
        if self.answered(Operation.SIGNUP, user, answered) and answered.account is not None:
            user.accounts.append(answered.account)
            self.set_active(user, answered.account)

    def cancel(self, user: _User) -> None:
        assert user.active is not None
        account = user.active
        now = self.now()
        if not self.answered(Operation.CANCEL, user, self.service.cancel(user.user_id)):
            return
        self.clear_active(user)
        user.cancelled = account
        user.cancellation_ttl = writes.ttl_after(now, self.config.cleanup_ttl_days)
        self.cancelled.add(user)

    def reactivate(self, user: _User) -> None:
        assert user.cancelled is not None
        account = user.cancelled
        self.now()
        if not self.answered(Operation.REACTIVATE, user, self.service.reactivate(user.user_id)):
            return
        self.cancelled.discard(user)
        user.cancelled = None
        self.set_active(user, account)

    def second_signup(self, user: _User) -> None:
        self.now()
        answered = self.service.second_signup(user.user_id)
        if self.answered(Operation.SECOND_SIGNUP, user, answered) and answered.account is not None:
            if answered.account not in user.accounts:
                user.accounts.append(answered.account)
            self.set_active(user, answered.account)

    def begin_relink(self, user: _User, index: int) -> None:
        self.now()
        answered = self.service.relink(user.user_id)
        if answered.answer is OperationAnswer.DONE:
            self.summary.relinks_saved += 1
        elif answered.answer is OperationAnswer.NOT_ACTIVE:
            self.summary.guard_rejections += 1  # terminal: recorded, never retried
        else:
            self.refused(Operation.RELINK)


def run_simulation(
    config: SimulationConfig,
    table: DirectWrites,
    clock: Clock,
    *,
    service: EntitlementOperations | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationSummary:
    """Run the workload and return its summary; `progress(done, total)` is called before each operation
    and at the end. With `service` every operation goes through it (the service's own code); without,
    the mix is written to `table` directly (the table-only workload). Planted faults are always direct
    writes to `table`."""
    simulation = (
        _Simulation(config, table, clock, sleep, monotonic)
        if service is None
        else _ThroughTheService(config, table, clock, sleep, monotonic, service=service)
    )
    simulation.progress = progress
    summary = simulation.run()
    if progress is not None:
        progress(config.operations, config.operations)
    return summary

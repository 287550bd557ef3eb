"""The anomalies a workload through the service cannot produce, planted by direct table writes
(`devstack.direct_writes`), each on its own user, and described so that the demo's verdict can check the
audits found each one:

- `stale_put_race`: the race SaveIfActive guards against. A relink reads an Active row, a second signup
  supersedes it, then the relink writes the stale image back unconditionally: the user has two Active
  rows and a stale cleanup record naming an account in use;
- `failed_reactivation_delete`: a reactivation whose delete of the cancellation record failed: the row is
  Active and the cancellation record is left behind;
- `string_ttl`: a cancellation whose record's ttl is a string (DynamoDB never expires it);
- `millisecond_ttl`: a second signup whose stale record's ttl is in milliseconds (never expires);
- `token_canary`: a signup (and a relink of it) with a distinctive processor token the lake must never hold.

Only `PlantedFault.to_json(include_keys=True)` holds item keys, user ids and canary tokens.
"""

from __future__ import annotations

__all__ = [
    "CANARY_TOKEN_PREFIX",
    "FaultKind",
    "FaultPlanter",
    "FaultSettings",
    "PlantedFault",
    "PlantedItem",
    "new_id",
    "new_token",
    "plant_faults",
]

import random
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, cast

from devstack import _writes as writes
from devstack.direct_writes import DirectWrites
from schema.clock import Clock
from schema.table import EntitlementStatus, cancellation_key, entitlement_key, stale_key

CANARY_TOKEN_PREFIX = "PTOK-CANARY-"  # noqa: S105  (a marker to search for, not a secret)
_TOKEN_PREFIX = "ptok-"  # noqa: S105


def new_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def new_token(rng: random.Random, *, canary: bool = False) -> str:
    prefix = CANARY_TOKEN_PREFIX if canary else _TOKEN_PREFIX
    return f"{prefix}{rng.getrandbits(128):032x}"


class FaultKind(StrEnum):
    STALE_PUT_RACE = "stale_put_race"
    FAILED_REACTIVATION_DELETE = "failed_reactivation_delete"
    STRING_TTL = "string_ttl"
    MILLISECOND_TTL = "millisecond_ttl"
    TOKEN_CANARY = "token_canary"  # noqa: S105  (a fault kind, not a secret)


class FaultSettings(Protocol):
    """What planting needs of a run's configuration (`devstack.workload.SimulationConfig` has it)."""

    @property
    def seed(self) -> int: ...
    @property
    def faults_per_kind(self) -> int: ...
    @property
    def cleanup_ttl_days(self) -> int: ...
    @property
    def stale_entitlement_ttl_days(self) -> int: ...


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


class FaultPlanter:
    """Plants faults one at a time through `table` (direct writes), numbering them F001, F002, ... in
    the order planted. `rng` is the faults' own seeded stream (so planting leaves a mix's choices
    unchanged); `now` the business time of each write (the run's shared clock)."""

    def __init__(
        self, config: FaultSettings, table: DirectWrites, rng: random.Random, now: Callable[[], datetime]
    ) -> None:
        self.config = config
        self.table = table
        self.rng = rng
        self._now = now
        self.planted: list[PlantedFault] = []

    def now(self) -> datetime:
        return self._now()

    def new_token(self, rng: random.Random, *, canary: bool = False) -> str:
        return new_token(rng, canary=canary)

    def plant(self, kind: FaultKind, *, namespace: str = "") -> PlantedFault:
        rng = self.rng
        fault_id = f"F{len(self.planted) + 1:03d}"
        user_id = f"{namespace}{new_id(rng)}"
        account = new_id(rng)
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
            new_account = new_id(rng)
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

        fault = PlantedFault(
            fault_id=fault_id,
            kind=kind,
            items=tuple(items),
            array_account_id=account,
            processor_token=planted_token,
            user_id=user_id,
        )
        self.planted.append(fault)
        return fault


class _UnwrittenWrites:
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
    config: FaultSettings,
    table: DirectWrites,
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
    planter = FaultPlanter(config, table, random.Random(f"{config.seed}/faults"), clock.now)  # noqa: S311
    for kind in kinds:
        for _ in range(config.faults_per_kind):
            if kind in unwritten:
                planter.table = cast(DirectWrites, _UnwrittenWrites(table.table_name))
            planter.plant(kind, namespace=namespace)
            planter.table = table
    return list(planter.planted)

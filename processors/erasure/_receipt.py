"""An erasure's receipt: what each pass removed, per store, and, after its last pass, what a verifier
scanning every store the erasure cleared found there, with the erasure's times. The receipt holds no
personal data (store names, counts, times and the ledger id), so it is kept in the ledger
(`ErasureLedger.record_receipt`) and in the lake (the `erasure.completed` outcome's `detail`), both
written before the ACK goes out.

A receipt is clean when every store reads 0 traces. One that is not (a trace found, or a store that
could not be read) stops the ACK: the message is left for redelivery, and the figure
`entitlements_erasure_traces_found` (EMF `ErasureTracesFound`) counts it per store.

The stores scanned, by name: `table` (any item under `USER#<id>`, one consistent read), `lake/<table>`
for each purged lake table (every file under its folder, committed or not, the log included:
`LakeEraser.traces`), `quarantine`, `dead_letters`, `parked` and `leftover_files` (the consumer's copies,
matched as the erasure matches them: `ConsumerStores.scan`).
"""

from __future__ import annotations

__all__ = ["ErasureReceipt", "StoreScan", "verify_erasure"]

import json
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from processors.erasure._bounded import Deadline
from processors.erasure._procedure import AccountErasure
from processors.erasure._table import UserTable
from schema.errors import EntitlementsError

_T = TypeVar("_T")


class StoreScan(BaseModel):
    """One store's verdict: how many traces the verifier found (None: the store could not be read) and,
    where the store is files, how many it read."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    store: str
    traces: int | None
    files_scanned: int | None = None


class ErasureReceipt(BaseModel):
    """What one erasure did and what its verifier saw, with no personal data."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    version: int = 1
    ledger_id: str
    started_at: datetime  # the erasure's first pass began (the store's clock)
    pass_one_at: datetime | None  # the first pass finished
    erased_at: datetime  # the last pass finished its removals
    verified_at: datetime  # the verifier's scan finished
    # What each pass removed ("1", "2"), per store: `array/accounts` and `table/...` for this account
    # alone, `lake/rows_in_batch` and `consumer_stores/records_in_batch` for the pass's whole batch
    # (`batch_accounts` accounts shared one purge and one rewrite).
    removed: dict[str, dict[str, int]]
    stores: tuple[StoreScan, ...]  # the verifier's scan, per store

    @property
    def clean(self) -> bool:
        return all(scan.traces == 0 for scan in self.stores)

    @property
    def stores_with_traces(self) -> tuple[str, ...]:
        """The stores holding a trace or that could not be read (either stops the ACK)."""
        return tuple(scan.store for scan in self.stores if scan.traces != 0)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def verify_erasure(
    erasure: AccountErasure, table: UserTable, user_id: str, deadline: Deadline
) -> tuple[StoreScan, ...]:
    """Scan every store for `user_id` after the last pass. Never raises for a store that cannot be read:
    its scan says `traces=None`, which keeps the receipt from being clean."""
    targets = erasure.targets
    scans: list[StoreScan] = []

    def attempt(step: str, read: Callable[[], _T]) -> _T | None:
        try:
            return erasure.guarded(step, read, deadline)
        except EntitlementsError:
            return None

    try:
        held = table.has_items(user_id, deadline)
        scans.append(StoreScan(store="table", traces=1 if held else 0))
    except EntitlementsError:
        scans.append(StoreScan(store="table", traces=None))
    lake = attempt("verify-lake", lambda: dict(targets.lake.traces(user_id)))
    if lake is None:
        scans.append(StoreScan(store="lake", traces=None))
    else:
        for name in sorted(lake):
            found = lake[name]
            scans.append(
                StoreScan(store=f"lake/{name}", traces=None)
                if found is None
                else StoreScan(store=f"lake/{name}", traces=found.traces, files_scanned=found.files_scanned)
            )
    stores = attempt("verify-consumer-stores", lambda: targets.stores.scan(user_id))
    if stores is None:
        scans.append(StoreScan(store="consumer_stores", traces=None))
    else:
        scans.extend(StoreScan(store=name, traces=count) for name, count in sorted(stores.items()))
    return tuple(scans)

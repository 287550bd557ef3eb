"""An erasure's receipt: what each pass removed of that user, per store, and, after its last pass, what a
verifier scanning every store the erasure cleared found there, with the erasure's times. The receipt holds
no personal data (store names, counts, times and the ledger id), so it is kept in the ledger
(`ErasureLedger.record_receipt`) and in the lake (the `erasure.completed` outcome's `detail`), both
written before the ACK goes out.

A receipt is clean when every store reads 0 traces. One that is not (a trace found, or a store that
could not be read) stops the ACK: the message is left for redelivery, and the figure
`entitlements_erasure_traces_found` (EMF `ErasureTracesFound`) counts it per store.

The verifier serves a batch (`verify_erasures`): each store is scanned once for every account of the
batch's last passes, so its cost is per batch, not per erasure, and the receipts stay per erasure. The
scans share the batch's deadline: a batch whose scans cannot finish in time raises `ErasureTimeoutError`
("verify"), and its erasures are left for redelivery, unverified, not ACKed (the worker counts them).

The stores, by name: `table` (any item under `USER#<id>`, one consistent read each), `lake/<table>` for
each purged lake table (every file under its folder, committed or not, the log included:
`LakeEraser.traces_for`), `quarantine`, `dead_letters`, `parked` and `leftover_files` (the consumer's
copies, matched as the erasure matches them: `ConsumerStores.scan_for`), and `array`: Array offers no
listing of a user's accounts, and once the rows naming them are gone the store cannot name them again;
so each account the erasure's rows named was asked again after its delete and answered 404 (gone). The
receipt's `array` scan says how many (`checked`), and its `note` what cannot be checked.

What no erasure reaches is named too (`unreached`), so that the receipt does not read as "erased
everywhere" where it is not: with the Kinesis source (`SourceSettings.kind`), the Kinesis data stream
keeps every change, full images included, until its retention (`SourceSettings.retention_hours`)
ends, and Kinesis deletes no record before that; the entry says so, with the retention in hours. It is
not a scan (the verifier cannot read a stream by user, and nothing could be removed there), so it does
not make the receipt unclean.
"""

from __future__ import annotations

__all__ = [
    "ARRAY_NOTE",
    "KINESIS_NOTE",
    "ErasureReceipt",
    "StoreScan",
    "Unreached",
    "unreached_by_erasure",
    "verify_erasures",
]

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from config import SourceSettings
from processors.erasure._bounded import Deadline
from processors.erasure._errors import ErasureTimeoutError
from processors.erasure._lake import LakeTableScan
from processors.erasure._procedure import AccountErasure
from processors.erasure._table import UserTable
from schema.errors import EntitlementsError

_T = TypeVar("_T")

ARRAY_NOTE = (
    "each Array account the user's rows named answered 404 (gone) when asked after its delete; "
    "Array offers no listing by user, so an account no row named cannot be checked"
)

KINESIS_NOTE = (
    "the Kinesis data stream the consumer reads keeps every change of the table, full images included, "
    "until its retention ends; Kinesis deletes no record before that, so no erasure removes them there; "
    "the erasure ledger drops this account's earlier events on any later read"
)


class Unreached(BaseModel):
    """A place that holds the user's data and that no erasure reaches, and for how long it keeps it."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    store: str
    retention_hours: int
    note: str


def unreached_by_erasure(source: SourceSettings) -> tuple[Unreached, ...]:
    """What the receipt names as out of the erasure's reach for the consumer's `source`: with the
    Kinesis source, the Kinesis stream and its retention. Nothing for the DynamoDB stream source: its
    records also keep images for the stream's fixed 24 hours (docs/operations/erasure.md says so), but
    the receipt names the retention an operator sets, which can be a year."""
    if source.kind != "kinesis":
        return ()
    return (Unreached(store="kinesis", retention_hours=source.retention_hours, note=KINESIS_NOTE),)


class StoreScan(BaseModel):
    """One store's verdict: how many traces the verifier found (None: the store could not be read) and,
    where the store is files, how many it read; where the store can only be asked item by item (Array),
    how many items were `checked` and a `note` on what cannot be."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    store: str
    traces: int | None
    files_scanned: int | None = None
    checked: int | None = None
    note: str | None = None


class ErasureReceipt(BaseModel):
    """What one erasure did and what its verifier saw, with no personal data."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    version: int = 3  # 3: `unreached` added
    ledger_id: str
    started_at: datetime  # the erasure's first pass began (the store's clock)
    pass_one_at: datetime | None  # the first pass finished
    erased_at: datetime  # the last pass finished its removals
    verified_at: datetime  # the verifier's scan finished
    # What each pass removed ("1", "2") of this user, per store (`AccountErasure.erase_counted`).
    removed: dict[str, dict[str, int]]
    stores: tuple[StoreScan, ...]  # the verifier's scan, per store
    # Where the user's data stays whatever the erasure did (`unreached_by_erasure`); not scanned.
    unreached: tuple[Unreached, ...] = ()

    @property
    def clean(self) -> bool:
        return all(scan.traces == 0 for scan in self.stores)

    @property
    def stores_with_traces(self) -> tuple[str, ...]:
        """The stores holding a trace or that could not be read (either stops the ACK)."""
        return tuple(scan.store for scan in self.stores if scan.traces != 0)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def _array_scan(removed: Mapping[str, Mapping[str, int]]) -> StoreScan:
    """What Array answered about the user's accounts over every pass."""
    deleted = sum(counts.get("array/accounts", 0) for counts in removed.values())
    gone = sum(counts.get("array/confirmed_gone", 0) for counts in removed.values())
    return StoreScan(store="array", traces=max(0, deleted - gone), checked=gone, note=ARRAY_NOTE)


def _attempt(erasure: AccountErasure, step: str, read: Callable[[], _T], deadline: Deadline) -> _T | None:
    """`read()` bounded like any step: None when the store cannot be read; out of time, it raises."""
    try:
        return erasure.guarded(step, read, deadline)
    except ErasureTimeoutError:
        raise
    except EntitlementsError:
        return None


def verify_erasures(
    erasure: AccountErasure,
    table: UserTable,
    removed: Mapping[str, Mapping[str, Mapping[str, int]]],
    deadline: Deadline,
) -> dict[str, tuple[StoreScan, ...]]:
    """Scan every store once for all the users of `removed` (per user, what each pass removed of them)
    after their last pass. A store that cannot be read is `traces=None` for every user (never clean);
    a scan that cannot finish within `deadline` raises `ErasureTimeoutError("verify")`."""
    user_ids = list(removed)
    targets = erasure.targets
    scans: dict[str, list[StoreScan]] = {user_id: [] for user_id in user_ids}

    def lake_traces() -> Mapping[str, LakeTableScan | None]:
        try:
            until = deadline.monotonic_at("verify-lake", erasure.batch_timeout)
            return dict(targets.lake.traces_for(user_ids, until=until))
        except TimeoutError:
            raise ErasureTimeoutError("verify-lake") from None

    def table_scan(user_id: str) -> StoreScan | ErasureTimeoutError:
        try:
            held = table.has_items(user_id, deadline)
        except ErasureTimeoutError as error:
            return error
        except EntitlementsError:
            return StoreScan(store="table", traces=None)
        return StoreScan(store="table", traces=1 if held else 0)

    # One read per account, all at once: the batch's time goes to the lake's scan, not to waiting.
    for user_id, scan in zip(user_ids, erasure.parallel.map(table_scan, user_ids), strict=True):
        if isinstance(scan, ErasureTimeoutError):
            raise scan
        scans[user_id].append(scan)
    lake = _attempt(erasure, "verify-lake", lake_traces, deadline)
    for user_id in user_ids:
        if lake is None:
            scans[user_id].append(StoreScan(store="lake", traces=None))
            continue
        for name in sorted(lake):
            found = lake[name]
            store = f"lake/{name}"
            scans[user_id].append(
                StoreScan(store=store, traces=None)
                if found is None
                else StoreScan(
                    store=store,
                    traces=found.traces_of(user_id),
                    files_scanned=found.files_scanned,
                )
            )
    stores = _attempt(erasure, "verify-consumer-stores", lambda: targets.stores.scan_for(user_ids), deadline)
    for user_id in user_ids:
        if stores is None:
            scans[user_id].append(StoreScan(store="consumer_stores", traces=None))
        else:
            scans[user_id].extend(
                StoreScan(store=name, traces=count) for name, count in sorted(stores[user_id].items())
            )
        scans[user_id].append(_array_scan(removed[user_id]))
    return {user_id: tuple(found) for user_id, found in scans.items()}

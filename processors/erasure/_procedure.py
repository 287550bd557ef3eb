"""ERASE and CHECK/CLASSIFY by ACCOUNT: the work behind the two implemented capabilities.

ERASE removes the account's data in an order that never loses the map to what remains (the table's rows
name the Array accounts; the table outlives everything it names):

1. the ledger entry (before anything is deleted, so the lake's landing drops the account's events,
   including the REMOVEs this erasure itself causes, from this moment on);
2. the Array accounts the account's rows and cleanup records name (deleted; a 404 is done; the cleanup
   processor's in-use guard does not apply: every account of an erased user goes), each confirmed gone
   as far as Array can say: an account Array deleted is asked again, and must answer 404 (Array offers
   no listing of a user's accounts, and once the rows that name them are gone the store cannot name
   them again, so this is where the receipt's Array check is made);
3. its cleanup records (so no TTL expiry fires for an account already deleted);
4. its entitlement rows (the one exception to "rows are never deleted"), then any other item under its
   partition key;
5. its rows in every lake dataset: masked at once, then purged in one batched rewrite for every account
   of the received batch;
6. its quarantined records, dead letters and parked work (`ConsumerStores`: on any content, a record
   that cannot be decoded is matched on its text against the user id, `USER#<id>` and the Array
   accounts step 2 found).

What a pass removed is counted per account (`erase_counted`): its Array accounts, its table items, its
rows per lake table, its quarantined, dead-lettered and parked records, though the lake and the
consumer's stores are rewritten once for the whole batch.

A step that fails stops that account's erasure (later steps would lose the map) and leaves its message for
SQS to redeliver; every step is idempotent, so a redelivered message starts again from step 1 harmlessly.
Each destructive call is bounded by the batch timeout and by what is left of the handler timeout.
"""

from __future__ import annotations

__all__ = ["AccountErasure", "ErasureTargets"]

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from adapters import (
    ArrayClient,
    ArrayCredentialError,
    ArrayRequestRejected,
    ArrayTransientError,
    ErrArrayUserAlreadyDeleted,
)
from config import SourceSettings
from processors.erasure._bounded import BoundedCalls, Deadline, Parallel
from processors.erasure._clients import DynamoDBTableClient
from processors.erasure._consumer_stores import ConsumerStores, StoreCounts
from processors.erasure._errors import ErasureStepError, state_files
from processors.erasure._lake import LakeEraser
from processors.erasure._ledger import ErasureLedger
from processors.erasure._table import UserTable
from schema.clock import Clock
from schema.erasure import HoldingsAnswer
from schema.errors import EntitlementsError

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


@dataclass(frozen=True)
class ErasureTargets:
    """Everywhere this store keeps an account's data, and the ledger that remembers erasures."""

    dynamodb: DynamoDBTableClient
    table_name: str
    array: ArrayClient
    lake: LakeEraser
    stores: ConsumerStores
    ledger: ErasureLedger
    # Where the consumer reads the table's changes: the receipt names what of it no erasure reaches.
    source: SourceSettings = field(default_factory=SourceSettings)


@dataclass(slots=True)
class EraseCounts:
    array_accounts: int = 0
    array_confirmed_gone: int = 0  # answered 404 (gone) when asked after the delete
    cleanup_records: int = 0
    entitlement_rows: int = 0
    other_items: int = 0
    lake_rows: int = 0
    consumer_copies: int = 0
    # The Array accounts the rows named (matched in the consumer's copies; never logged).
    array_account_ids: list[str] = field(default_factory=list)


def _code(error: BaseException) -> str:
    code = getattr(error, "code", None)
    return code if isinstance(code, str) else type(error).__name__


class AccountErasure:
    def __init__(
        self,
        targets: ErasureTargets,
        calls: BoundedCalls,
        *,
        batch_timeout: float,
        clock: Clock,
        parallel: Parallel | None = None,
    ) -> None:
        self._t = targets
        self._calls = calls
        self._parallel = parallel or Parallel(1)
        self._batch = batch_timeout
        self._clock = clock
        self._table = UserTable(targets.dynamodb, targets.table_name, calls, batch_timeout)

    @property
    def targets(self) -> ErasureTargets:
        return self._t

    @property
    def parallel(self) -> Parallel:
        """The pool the batch's accounts are worked on at once."""
        return self._parallel

    @property
    def batch_timeout(self) -> float:
        """The most one call may take (seconds)."""
        return self._batch

    # -- ERASE --------------------------------------------------------------------------------------

    def erase(self, user_ids: Sequence[str], deadline: Deadline) -> dict[str, EntitlementsError | None]:
        """One pass over `user_ids`: each maps to None (erased everywhere) or the error that stopped it."""
        return self.erase_counted(user_ids, deadline)[0]

    def erase_counted(
        self, user_ids: Sequence[str], deadline: Deadline
    ) -> tuple[dict[str, EntitlementsError | None], dict[str, dict[str, int]]]:
        """`erase`, and what the pass removed of each account erased everywhere (for its receipt),
        each count that account's alone though one purge and one consumer-store rewrite serve the
        batch: `array/accounts` (deleted), `array/confirmed_gone` (answered 404 when asked after),
        `table/entitlement_rows`, `table/cleanup_records`, `table/other_items`, `lake/<table>` (rows,
        the stored audit failures included), `quarantine/records`, `dead_letters/records`,
        `parked/records`, `parked/files_changed`, `consumer_stores/unreadable_files`,
        `consumer_stores/leftover_files`."""
        accounts = list(dict.fromkeys(user_ids))
        counts = EraseCounts()
        accounts_of: dict[str, list[str]] = {}

        def table_side(user_id: str) -> EraseCounts | EntitlementsError:
            try:
                return self._erase_table_side(user_id, deadline)
            except EntitlementsError as error:
                return error

        results: dict[str, EntitlementsError | None] = {}
        removed: dict[str, dict[str, int]] = {}
        for user_id, outcome in zip(accounts, self._parallel.map(table_side, accounts), strict=True):
            if isinstance(outcome, EntitlementsError):
                results[user_id] = outcome
                continue
            results[user_id] = None
            accounts_of[user_id] = outcome.array_account_ids
            removed[user_id] = {
                "array/accounts": outcome.array_accounts,
                "array/confirmed_gone": outcome.array_confirmed_gone,
                "table/cleanup_records": outcome.cleanup_records,
                "table/entitlement_rows": outcome.entitlement_rows,
                "table/other_items": outcome.other_items,
            }
            counts.array_accounts += outcome.array_accounts
            counts.cleanup_records += outcome.cleanup_records
            counts.entitlement_rows += outcome.entitlement_rows
            counts.other_items += outcome.other_items
        ready = [user_id for user_id, error in results.items() if error is None]
        if ready:
            try:
                copies = self._erase_copies(ready, {u: accounts_of[u] for u in ready}, deadline, counts)
            except EntitlementsError as error:
                results.update(dict.fromkeys(ready, error))
            else:
                for user_id in ready:
                    removed[user_id].update(copies.get(user_id, {}))
        done = [user_id for user_id, error in results.items() if error is None]
        failed = sum(1 for error in results.values() if error is not None)
        logger.info(
            "erasure pass",
            extra={
                "accounts": len(results),
                "failed": failed,
                "array_accounts": counts.array_accounts,
                "cleanup_records": counts.cleanup_records,
                "entitlement_rows": counts.entitlement_rows,
                "other_items": counts.other_items,
                "lake_rows": counts.lake_rows,
                "consumer_copies": counts.consumer_copies,
            },
        )
        return results, {user_id: removed[user_id] for user_id in done}

    def _erase_table_side(self, user_id: str, deadline: Deadline) -> EraseCounts:
        """Steps 1 to 4 for one account, in order."""
        t = self._t
        counts = EraseCounts()
        now = self._clock.now()
        self._calls.call("ledger", lambda: t.ledger.record_started(user_id, now), deadline, self._batch)
        items = self._table.read(user_id, deadline)
        for account in items.array_account_ids:
            self._delete_array_account(account, deadline)
            counts.array_accounts += 1
            counts.array_confirmed_gone += 1
            counts.array_account_ids.append(account)
        counts.cleanup_records = self._table.delete(items.cleanup_keys, deadline, step="cleanup-records")
        counts.entitlement_rows = self._table.delete(
            items.entitlement_keys, deadline, step="entitlement-rows"
        )
        counts.other_items = self._table.delete(items.other_keys, deadline, step="other-items")
        return counts

    def _delete_array_account(self, account: str, deadline: Deadline) -> None:
        """Delete the account at Array and confirm it gone: a 404 is both; after a 2xx, Array is asked
        again and must answer 404 (`ErasureStepError("array-confirm", "NOT_GONE")` otherwise)."""
        # Deleting again is the one question Array answers about an account: 404 once it is gone.
        if not self._array_delete("array", account, deadline) and not self._array_delete(
            "array-confirm", account, deadline
        ):
            raise ErasureStepError("array-confirm", "NOT_GONE")

    def _array_delete(self, step: str, account: str, deadline: Deadline) -> bool:
        """One bounded delete-user: True when Array answered 404 (gone), False when it deleted it."""
        array = self._t.array
        finish_by = deadline.monotonic_at(step, self._batch)

        def delete() -> bool:
            try:
                array.delete_user(account, deadline=finish_by)
            except ErrArrayUserAlreadyDeleted:
                return True  # 404: already gone, which is what the erasure wants
            except (ArrayCredentialError, ArrayTransientError, ArrayRequestRejected) as error:
                raise ErasureStepError(step, error.code) from None
            return False

        return self._calls.call(step, delete, deadline, self._batch)

    def _erase_copies(
        self,
        user_ids: list[str],
        accounts_of: dict[str, list[str]],
        deadline: Deadline,
        counts: EraseCounts,
    ) -> dict[str, dict[str, int]]:
        """Steps 5 and 6 for the batch at once; returns what they removed of each user."""
        t = self._t
        self.guarded("lake-mask", lambda: t.lake.mask(user_ids), deadline)
        lake = self.guarded("lake-purge", lambda: t.lake.purge(user_ids), deadline)
        stores = self.guarded(
            "consumer-stores", lambda: t.stores.erase(user_ids, array_account_ids=accounts_of), deadline
        )
        counts.lake_rows += sum(sum(tables.values()) for tables in lake.values())
        counts.consumer_copies += (
            stores.quarantined_removed
            + stores.parked_records_removed
            + stores.dead_letters_removed
            + stores.unreadable_files_removed
            + stores.leftover_files_removed
        )
        removed: dict[str, dict[str, int]] = {}
        for user_id in user_ids:
            mine = stores.by_user.get(user_id, StoreCounts())
            removed[user_id] = {
                **{f"lake/{name}": rows for name, rows in sorted(lake.get(user_id, {}).items())},
                "quarantine/records": mine.quarantined_removed,
                "dead_letters/records": mine.dead_letters_removed,
                "parked/records": mine.parked_records_removed,
                "parked/files_changed": mine.parked_files_changed,
                "consumer_stores/unreadable_files": mine.unreadable_files_removed,
                "consumer_stores/leftover_files": mine.leftover_files_removed,
            }
        return removed

    def guarded(self, step: str, fn: Callable[[], _T], deadline: Deadline) -> _T:
        """`fn()` bounded by the batch timeout, any failure converted once: an `OSError` (a full disk, a
        read-only state directory) to `ErasureStateError(step, errno name)`, anything else to
        `ErasureStepError(step, class name)`. Both are retryable."""

        def run() -> _T:
            try:
                with state_files(step):
                    return fn()
            except EntitlementsError:
                raise
            except Exception as error:  # a store's own failure (Arrow, DuckDB): its class only
                raise ErasureStepError(step, type(error).__name__) from None

        return self._calls.call(step, run, deadline, self._batch)

    # -- CHECK / CLASSIFY -------------------------------------------------------------------------

    def holdings(self, user_id: str, deadline: Deadline) -> HoldingsAnswer:
        """HOLDS_DATA when the table, the lake or the consumer's copies hold a row of the account;
        HOLDS_NONE when none does; CANNOT_ANSWER when no part holds one and a part cannot be read."""
        t = self._t
        unreadable: list[str] = []

        parts: tuple[tuple[str, Callable[[], bool | None], bool], ...] = (
            # (step, read, bounded here): the table's calls bound themselves
            ("table-read", lambda: self._table.has_items(user_id, deadline), False),
            ("lake-read", lambda: t.lake.holds(user_id), True),
            ("consumer-stores-read", lambda: t.stores.holds(user_id), True),
        )
        for step, read, bound_here in parts:
            try:
                held = self.guarded(step, read, deadline) if bound_here else read()
            except EntitlementsError as error:
                unreadable.append(f"{step}:{_code(error)}")
                continue
            if held is None:
                unreadable.append(f"{step}:unreadable")
            elif held:
                return "HOLDS_DATA"
        if unreadable:
            logger.warning("holdings cannot answer", extra={"unreadable": unreadable})
            return "CANNOT_ANSWER"
        return "HOLDS_NONE"

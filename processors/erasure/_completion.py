"""A batch's second passes completed: verified, the receipts kept, the evidence landed.

`verify_erasures` scans every store once for all the batch's accounts; each account's receipt is kept in
the ledger; for the accounts whose receipt is clean the ledger entry is completed, the lake unmasks them
(one write for the batch) and `erasure.completed` outcomes carrying the receipt (no personal data) are
landed and flushed, so the evidence is durable before any ACK goes out."""

from __future__ import annotations

__all__ = ["Completion"]

import logging
from collections.abc import Mapping

import telemetry
from processors.erasure._batch import Batch, BatchTools, Job
from processors.erasure._errors import ErasureStepError, ErasureTimeoutError
from processors.erasure._ledger import ERASE_PASSES, LedgerEntry
from processors.erasure._receipt import ErasureReceipt, unreached_by_erasure, verify_erasures
from processors.erasure._table import UserTable
from schema.erasure import EraseRequest
from schema.errors import EntitlementsError
from schema.outcomes import FlushingSink, OutcomeEvent, OutcomeKind, outcome_id

logger = logging.getLogger(__name__)


def _cycle(entry: LedgerEntry) -> str:
    """An erasure cycle's mark (its completion time): each cycle of one account lands its own outcome."""
    return entry.completed_at.isoformat() if entry.completed_at is not None else ""


class Completion:
    def __init__(self, tools: BatchTools, table: UserTable, outcomes: FlushingSink | None) -> None:
        self._tools = tools
        self._table = table
        self._outcomes = outcomes

    def complete(
        self, finals: list[Job], batch: Batch, removed: Mapping[str, Mapping[str, int]]
    ) -> dict[str, EntitlementsError]:
        """Returns the accounts that must not be answered, with why: a trace found (counted in
        `entitlements_erasure_traces_found`), a verification that ran out of the batch's time (counted
        in `unverified`), or a step that failed. Raises when a step for the whole batch (the unmask,
        the outcomes) fails."""
        tools = self._tools
        targets = tools.erasure.targets
        ledger = targets.ledger
        deadline = batch.deadline
        user_ids = list(
            dict.fromkeys(job.request.key for job in finals if isinstance(job.request, EraseRequest))
        )
        withheld: dict[str, EntitlementsError] = {}
        receipts = self._receipts(user_ids, batch, removed, withheld)
        clean = list(receipts)

        def complete(user_id: str) -> LedgerEntry | EntitlementsError:
            try:
                return tools.calls.call(
                    "ledger",
                    lambda: ledger.record_pass(
                        user_id, ERASE_PASSES, receipts[user_id].verified_at, removed=removed.get(user_id)
                    ),
                    deadline,
                    tools.limit,
                )
            except EntitlementsError as error:
                return error

        completed: dict[str, LedgerEntry] = {}
        for user_id, done in zip(clean, tools.parallel.map(complete, clean), strict=True):
            if isinstance(done, EntitlementsError):
                withheld[user_id] = done
            else:
                completed[user_id] = done
        if not completed:
            return withheld
        finished = list(completed)
        tools.erasure.guarded("lake-unmask", lambda: targets.lake.unmask(finished), deadline)
        recorder = self._outcomes
        if recorder is None:
            return withheld
        outcomes = [
            OutcomeEvent(
                # One outcome per completed cycle: a redelivered second pass lands the same id again.
                outcome_id=outcome_id(
                    f"erasure:{ledger.ledger_id(user_id)}:{_cycle(entry)}", OutcomeKind.ERASURE_COMPLETED
                ),
                kind=OutcomeKind.ERASURE_COMPLETED,
                occurred_at=entry.completed_at or receipts[user_id].verified_at,
                user_id=None,  # no personal data: the ledger id links the outcome to the ledger
                array_account_id=None,
                detail=receipts[user_id].to_json(),
            )
            for user_id, entry in completed.items()
        ]

        def record() -> None:
            for outcome in outcomes:
                recorder.add_outcome(outcome)
            recorder.flush()  # durable in the lake before the ACK, not when the worker stops

        tools.erasure.guarded("outcome", record, deadline)
        return withheld

    def _receipts(
        self,
        user_ids: list[str],
        batch: Batch,
        removed: Mapping[str, Mapping[str, int]],
        withheld: dict[str, EntitlementsError],
    ) -> dict[str, ErasureReceipt]:
        """Verify the batch's second passes at once and keep each account's receipt in the ledger;
        returns the clean receipts, and puts in `withheld` each account that must not be answered."""
        tools = self._tools
        ledger = tools.erasure.targets.ledger
        deadline = batch.deadline
        erased_at = tools.clock.now()

        def entry_of(user_id: str) -> LedgerEntry | EntitlementsError | None:
            try:
                return tools.calls.call("ledger", lambda: ledger.entry(user_id), deadline, tools.limit)
            except EntitlementsError as error:
                return error

        entries: dict[str, LedgerEntry | None] = {}
        passes: dict[str, dict[str, dict[str, int]]] = {}
        for user_id, entry in zip(user_ids, tools.parallel.map(entry_of, user_ids), strict=True):
            if isinstance(entry, EntitlementsError):
                withheld[user_id] = entry
                continue
            entries[user_id] = entry
            removed_by_pass = {n: dict(stores) for n, stores in entry.removed.items()} if entry else {}
            removed_by_pass[str(ERASE_PASSES)] = dict(removed.get(user_id, {}))
            passes[user_id] = removed_by_pass
        try:
            scans = verify_erasures(tools.erasure, self._table, passes, deadline) if passes else {}
        except ErasureTimeoutError as error:
            batch.report.unverified += len(passes)
            telemetry.erasure_unverified("timeout", len(passes))
            logger.error(
                "erasure verification ran out of the batch's time: no ACK, left for redelivery",
                extra={"accounts": len(passes), "step": error.step},
            )
            withheld.update(dict.fromkeys(passes, error))
            return {}
        verified_at = tools.clock.now()

        def kept(user_id: str) -> ErasureReceipt | EntitlementsError:
            entry = entries[user_id]
            receipt = ErasureReceipt(
                ledger_id=ledger.ledger_id(user_id),
                removed=passes[user_id],
                started_at=entry.started_at if entry is not None else erased_at,
                pass_one_at=entry.pass_one_at if entry is not None else None,
                erased_at=erased_at,
                verified_at=verified_at,
                stores=scans[user_id],
                unreached=unreached_by_erasure(tools.erasure.targets.source),
            )
            try:
                tools.calls.call(
                    "receipt",
                    lambda: ledger.record_receipt(user_id, receipt.verified_at, receipt.to_json()),
                    deadline,
                    tools.limit,
                )
            except EntitlementsError as error:
                return error
            return receipt

        receipts: dict[str, ErasureReceipt] = {}
        for user_id, outcome in zip(list(scans), tools.parallel.map(kept, list(scans)), strict=True):
            if isinstance(outcome, EntitlementsError):
                withheld[user_id] = outcome
            elif not outcome.clean:
                for store in outcome.stores_with_traces:
                    telemetry.erasure_traces_found(store)
                if any(scan.traces is None for scan in outcome.stores):
                    # A store that could not be read leaves the erasure unverified, not only traced.
                    batch.report.unverified += 1
                    telemetry.erasure_unverified("unreadable", 1)
                logger.error(
                    "erasure verifier found traces: no ACK, left for redelivery",
                    extra={"stores": list(outcome.stores_with_traces)},
                )
                withheld[user_id] = ErasureStepError("verify", "TRACES_FOUND")
            else:
                receipts[user_id] = outcome
        return receipts

"""Repair: close the gap the service design admits. For every account the lake shows deleted by cleanup
(`cleanup.deleted` / `cleanup.already_deleted`), mark Removed, conditionally, each entitlement row naming it
that is not Removed. Run by hand (`entitlements cleanup repair`), never on its own; `dry_run` lists only."""

from __future__ import annotations

__all__ = ["DeletedAccountsSource", "RepairCandidate", "RepairReport", "repair_removed_rows"]

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from processors.cleanup._clients import DynamoDBClient
from processors.cleanup._errors import GuardUnavailableError
from processors.cleanup._table import find_rows_for_account, mark_row_removed
from schema.clock import Clock
from schema.table_writes import business_time


class DeletedAccountsSource(Protocol):
    """What repair needs from the lake: every (user id, Array account id) cleanup deleted at Array."""

    def deleted_accounts(self) -> Iterable[tuple[str | None, str]]: ...


@dataclass(frozen=True, slots=True)
class RepairCandidate:
    pk: str
    sk: str
    array_account_id: str
    status: str | None


@dataclass(slots=True)
class RepairReport:
    accounts: int = 0
    # Accounts the table holds any row of (Removed or not): none of many means the wrong table.
    accounts_with_rows: int = 0
    candidates: list[RepairCandidate] = field(default_factory=list)
    marked: int = 0
    # Rows found Removed by someone else between the read and the write (the mark's read-back).
    already_removed: list[RepairCandidate] = field(default_factory=list)
    # (candidate, error code) for rows not marked: a failed condition means the row changed meanwhile.
    failed: list[tuple[RepairCandidate, str]] = field(default_factory=list)
    # Accounts whose rows could not be read (GSI1 error code).
    unreadable: dict[str, str] = field(default_factory=dict)


def repair_removed_rows(
    dynamodb: DynamoDBClient,
    table_name: str,
    source: DeletedAccountsSource,
    *,
    clock: Clock,
    dry_run: bool,
    progress: Callable[[int, int], None] | None = None,
) -> RepairReport:
    """`progress(done, total)` is called before each account and at the end (a command's bar)."""
    report = RepairReport()
    accounts = sorted({account for _user, account in source.deleted_accounts() if account})
    report.accounts = len(accounts)
    updated_at = business_time(clock.now())
    for done, account in enumerate(accounts):
        if progress is not None:
            progress(done, len(accounts))
        try:
            rows = find_rows_for_account(dynamodb, table_name, account)
        except GuardUnavailableError as failed:
            report.unreadable[account] = failed.code
            continue
        if rows:
            report.accounts_with_rows += 1
        for row in rows:
            if row.is_removed:
                continue
            candidate = RepairCandidate(pk=row.pk, sk=row.sk, array_account_id=account, status=row.status)
            report.candidates.append(candidate)
            if dry_run:
                continue
            result = mark_row_removed(dynamodb, table_name, row, account, updated_at, read_back=True)
            if result.code == "already_removed":
                report.already_removed.append(candidate)
            elif result.marked:
                report.marked += 1
            else:
                report.failed.append((candidate, result.code))
    if progress is not None:
        progress(len(accounts), len(accounts))
    return report

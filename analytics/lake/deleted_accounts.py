"""`processors.cleanup._repair.DeletedAccountsSource` over the lake (processors never import analytics; the
repair command is handed this adapter): every Array account cleanup recorded as deleted or already
deleted, from the deduplicated `outcomes` view (so never an account of a user being erased)."""

from __future__ import annotations

__all__ = ["LakeDeletedAccounts"]

from collections.abc import Iterator
from typing import Any

from analytics.lake import Lake
from analytics.lake.views import connect
from schema.outcomes import OutcomeKind


class LakeDeletedAccounts:
    """`DeletedAccountsSource` over `lake`: (user id or None, account id), each account once."""

    _KINDS = (OutcomeKind.CLEANUP_DELETED.value, OutcomeKind.CLEANUP_ALREADY_DELETED.value)

    def __init__(self, lake: Lake) -> None:
        self._lake = lake

    def deleted_accounts(self) -> Iterator[tuple[str | None, str]]:
        con = connect(self._lake, views=["outcomes"])
        try:
            rows: list[tuple[Any, Any]] = con.execute(
                "SELECT DISTINCT user_id, array_account_id FROM outcomes "
                "WHERE kind IN (?, ?) AND array_account_id IS NOT NULL ORDER BY array_account_id",
                list(self._KINDS),
            ).fetchall()
        finally:
            con.close()
        for user_id, account in rows:
            yield (None if user_id is None else str(user_id)), str(account)

"""processors/cleanup/_table.py: the GSI1 read behind the in-use guard and the conditional mark."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from processors.cleanup._errors import GuardUnavailableError
from processors.cleanup._table import RowRef, find_rows_for_account, mark_row_removed

CHECK_FAILED = ClientError({"Error": {"Code": "ConditionalCheckFailedException"}}, "UpdateItem")


class Table:
    """GSI1 pages as given; `get_item` answers from `rows`; `update_item` records or raises."""

    def __init__(self, pages: list[dict[str, Any]], rows: dict[str, Any] | None = None) -> None:
        self.pages = pages
        self.rows = rows or {}
        self.updates: list[dict[str, Any]] = []
        self.fail: Exception | None = None

    def query(self, **request: Any) -> dict[str, Any]:
        if self.fail:
            raise self.fail
        return self.pages.pop(0)

    def get_item(self, **request: Any) -> dict[str, Any]:
        return (
            {"Item": self.rows.get(request["Key"]["sk"]["S"])}
            if request["Key"]["sk"]["S"] in self.rows
            else {}
        )

    def update_item(self, **request: Any) -> dict[str, Any]:
        if self.fail:
            raise self.fail
        self.updates.append(request)
        return {}


def row(sk: str, account: str | None = "a1", status: str | None = "Active") -> dict[str, Any]:
    item: dict[str, Any] = {"pk": {"S": "USER#u1"}, "sk": {"S": sk}}
    if account is not None:
        item["arrayAccountId"] = {"S": account}
    if status is not None:
        item["status"] = {"S": status}
    return item


def test_every_page_of_gsi1_is_read_and_rows_of_another_account_are_left_out() -> None:
    table = Table(
        [{"Items": [row("E#1")], "LastEvaluatedKey": {"k": {"S": "1"}}}, {"Items": [row("E#2", "a2")]}]
    )
    assert find_rows_for_account(table, "t", "a1") == [RowRef("USER#u1", "E#1", "Active")]


def test_a_row_gsi1_does_not_project_is_read_back_from_the_table() -> None:
    table = Table([{"Items": [row("E#1", None, None)]}], rows={"E#1": row("E#1", "a1", "Removed")})
    [found] = find_rows_for_account(table, "t", "a1")
    assert found.is_removed


def test_a_gsi1_that_cannot_be_read_makes_the_guard_unavailable() -> None:
    table = Table([])
    table.fail = ClientError({"Error": {"Code": "ThrottlingException"}}, "Query")
    with pytest.raises(GuardUnavailableError):
        find_rows_for_account(table, "t", "a1")


def test_a_mark_is_conditional_on_the_row_still_naming_the_account() -> None:
    table = Table([])
    result = mark_row_removed(
        table, "t", RowRef("USER#u1", "E#1", "Active"), "a1", "2026-01-01T00:00:00.000Z"
    )
    assert (result.marked, table.updates[0]["ExpressionAttributeValues"][":acct"]) == (True, {"S": "a1"})


def test_a_failed_condition_is_reported_by_its_code_not_raised() -> None:
    table = Table([])
    table.fail = CHECK_FAILED
    result = mark_row_removed(table, "t", RowRef("USER#u1", "E#1", "Active"), "a1", "now")
    assert (result.marked, result.code) == (False, "ConditionalCheckFailedException")


def test_a_refused_mark_of_a_row_already_removed_naming_the_account_counts_as_marked() -> None:
    table = Table([], rows={"E#1": row("E#1", "a1", "Removed")})
    table.fail = CHECK_FAILED  # the retry of a request whose first attempt marked it
    result = mark_row_removed(table, "t", RowRef("USER#u1", "E#1", "Superseded"), "a1", "now", read_back=True)
    assert (result.marked, result.code) == (True, "already_removed")


def test_a_refused_mark_of_a_row_now_naming_another_account_stays_refused() -> None:
    table = Table([], rows={"E#1": row("E#1", "a2", "Removed")})
    table.fail = CHECK_FAILED
    result = mark_row_removed(table, "t", RowRef("USER#u1", "E#1", "Superseded"), "a1", "now", read_back=True)
    assert (result.marked, result.code) == (False, "ConditionalCheckFailedException")

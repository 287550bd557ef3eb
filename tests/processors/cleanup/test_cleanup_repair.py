"""repair_removed_rows: the core of `entitlements cleanup repair`, with an in-memory lake source."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from botocore.exceptions import ClientError

from processors.cleanup import repair_removed_rows
from processors.cleanup._repair import DeletedAccountsSource
from tests.processors.cleanup.cleanup_helpers import FixedClock


class Deleted:
    def __init__(self, *pairs: tuple[str | None, str]) -> None:
        self.pairs = pairs

    def deleted_accounts(self) -> Iterable[tuple[str | None, str]]:
        return self.pairs


def test_each_account_is_examined_once_however_often_the_lake_shows_it(
    dynamodb: Any, table: str, put_row: Callable[[str, str, str], None]
) -> None:
    put_row("u1", "acct-1", "Cancelled")
    source: DeletedAccountsSource = Deleted(("u1", "acct-1"), ("u1", "acct-1"), (None, "acct-1"))
    report = repair_removed_rows(dynamodb, table, source, clock=FixedClock(), dry_run=False)
    assert report.accounts == 1
    assert report.marked == 1


def test_a_dry_run_lists_without_writing(
    dynamodb: Any,
    table: str,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
) -> None:
    put_row("u1", "acct-1", "Superseded")
    report = repair_removed_rows(dynamodb, table, Deleted(("u1", "acct-1")), clock=FixedClock(), dry_run=True)
    assert [(c.pk, c.sk, c.status) for c in report.candidates] == [
        ("USER#u1", "ENTITLEMENT#acct-1", "Superseded")
    ]
    assert report.marked == 0
    assert (get_row("u1", "acct-1") or {})["status"] == "Superseded"


class _Racing:
    """Someone else writes the row (`changes`) between repair's read and its write."""

    def __init__(self, inner: Any, table: str, changes: dict[str, str]) -> None:
        self.inner, self.table, self.changes = inner, table, changes

    def query(self, **kwargs: Any) -> Any:
        page = self.inner.query(**kwargs)
        for item in page.get("Items", []):
            names = {f"#a{i}": name for i, name in enumerate(self.changes)}
            values = {f":v{i}": {"S": value} for i, value in enumerate(self.changes.values())}
            self.inner.update_item(
                TableName=self.table,
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(names))),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        return page

    def get_item(self, **kwargs: Any) -> Any:
        return self.inner.get_item(**kwargs)

    def update_item(self, **kwargs: Any) -> Any:
        return self.inner.update_item(**kwargs)


def test_the_write_is_conditional_a_row_changed_meanwhile_is_reported_not_overwritten(
    dynamodb: Any,
    table: str,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
) -> None:
    put_row("u1", "acct-1", "Cancelled")
    racing = _Racing(dynamodb, table, {"arrayAccountId": "acct-2"})
    report = repair_removed_rows(racing, table, Deleted(("u1", "acct-1")), clock=FixedClock(), dry_run=False)
    assert report.marked == 0
    assert [code for _candidate, code in report.failed] == ["ConditionalCheckFailedException"]
    assert (get_row("u1", "acct-1") or {})["status"] == "Cancelled"


def test_a_row_marked_removed_meanwhile_counts_as_already_removed_not_as_marked_or_failed(
    dynamodb: Any, table: str, put_row: Callable[[str, str, str], None]
) -> None:
    put_row("u1", "acct-1", "Cancelled")
    racing = _Racing(dynamodb, table, {"status": "Removed"})
    report = repair_removed_rows(racing, table, Deleted(("u1", "acct-1")), clock=FixedClock(), dry_run=False)
    assert (report.marked, len(report.already_removed), report.failed) == (0, 1, [])


class _Unreadable:
    def query(self, **kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "ThrottlingException"}}, "Query")

    def get_item(self, **kwargs: Any) -> Any:
        raise AssertionError("not reached")

    def update_item(self, **kwargs: Any) -> Any:
        raise AssertionError("not reached")


def test_accounts_whose_rows_cannot_be_read_are_reported(table: str) -> None:
    report = repair_removed_rows(
        _Unreadable(), table, Deleted(("u1", "acct-1")), clock=FixedClock(), dry_run=False
    )
    assert report.unreadable == {"acct-1": "ThrottlingException"}


def test_progress_is_reported_before_each_account_and_at_the_end(dynamodb: Any, table: str) -> None:
    seen: list[tuple[int, int]] = []
    repair_removed_rows(
        dynamodb,
        table,
        Deleted(("u1", "acct-1"), ("u2", "acct-2")),
        clock=FixedClock(),
        dry_run=True,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(0, 2), (1, 2), (2, 2)]

"""processors/erasure/_table.py: every item under the user's partition, by kind, and batched deletes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from processors.erasure._bounded import BoundedCalls, Deadline
from processors.erasure._table import UserTable
from schema.table import CANCELLATION_SK, ENTITLEMENT_SK_PREFIX, GUARD_SK, IDEMPOTENCY_SK_PREFIX, user_pk


class Client:
    """A DynamoDB client that answers queries with `pages` and records every call."""

    def __init__(self, *pages: dict[str, Any]) -> None:
        self.pages = list(pages)
        self.queries: list[dict[str, Any]] = []
        self.batches: list[int] = []

    def query(self, **request: Any) -> dict[str, Any]:
        self.queries.append(request)
        return self.pages.pop(0)

    def batch_write_item(self, **request: Any) -> dict[str, Any]:
        [entries] = request["RequestItems"].values()
        self.batches.append(len(entries))
        return {}


def item(sk: str, account: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"pk": {"S": user_pk("u1")}, "sk": {"S": sk}}
    if account:
        found["arrayAccountId"] = {"S": account}
    return found


@pytest.fixture
def calls() -> Iterator[BoundedCalls]:
    with BoundedCalls(max_workers=2) as bounded:
        yield bounded


def table(client: Client, calls: BoundedCalls) -> UserTable:
    return UserTable(client, "t", calls, batch_timeout=5.0)


def test_every_page_is_read_and_items_are_sorted_by_kind_with_the_accounts_they_name(
    calls: BoundedCalls,
) -> None:
    client = Client(
        {"Items": [item(f"{ENTITLEMENT_SK_PREFIX}a1", "a1")], "LastEvaluatedKey": {"k": {"S": "1"}}},
        {"Items": [item(CANCELLATION_SK), item("SOMETHING#new", "a9")]},
    )
    found = table(client, calls).read("u1", Deadline(10))
    assert [len(found.entitlement_keys), len(found.cleanup_keys), len(found.other_keys)] == [1, 1, 1]
    assert found.array_account_ids == ("a1",)  # an unknown item's account is not trusted
    assert client.queries[1]["ExclusiveStartKey"] == {"k": {"S": "1"}}


def test_a_user_id_too_long_for_a_partition_key_holds_nothing_and_the_table_is_not_asked(
    calls: BoundedCalls,
) -> None:
    client = Client()
    assert table(client, calls).read("u" * 3000, Deadline(10)).empty
    assert client.queries == []


def test_deletes_go_in_batches_of_at_most_25_keys(calls: BoundedCalls) -> None:
    client = Client()
    keys = [{"pk": {"S": user_pk("u1")}, "sk": {"S": f"X#{n}"}} for n in range(30)]
    assert table(client, calls).delete(keys, Deadline(10), step="table-delete") == 30
    assert client.batches == [25, 5]


def test_the_users_guard_and_idempotency_records_are_read_for_deletion_with_the_other_items(
    calls: BoundedCalls,
) -> None:
    client = Client(
        {
            "Items": [
                item(GUARD_SK),
                item(f"{IDEMPOTENCY_SK_PREFIX}d1"),
                item(f"{ENTITLEMENT_SK_PREFIX}a1", "a1"),
            ]
        }
    )
    found = table(client, calls).read("u1", Deadline(10))
    assert [key["sk"]["S"] for key in found.other_keys] == [GUARD_SK, f"{IDEMPOTENCY_SK_PREFIX}d1"]
    assert found.array_account_ids == ("a1",)

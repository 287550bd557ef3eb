"""End to end through the real Java daemon: table writes reach the Python processor as typed events."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.kcl import RunningConsumer, dynamodb, running_consumer

pytestmark = pytest.mark.kcl


@pytest.fixture(scope="module")
def consumer(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningConsumer]:
    with running_consumer(moto_endpoint, tmp_path_factory.mktemp("kcl")) as running:
        yield running


def put_row(endpoint: str, table: str, user: str, account: str, status: str) -> None:
    dynamodb(endpoint).put_item(
        TableName=table,
        Item={
            "pk": {"S": f"USER#{user}"},
            "sk": {"S": f"ENTITLEMENT#{account}"},
            "userId": {"S": user},
            "arrayAccountId": {"S": account},
            "status": {"S": status},
            "gsi1pk": {"S": f"ARRAY#{account}"},
            "gsi1sk": {"S": "ENTITLEMENT"},
        },
    )


def test_writes_arrive_as_typed_events_in_order_per_item(
    moto_endpoint: str, consumer: RunningConsumer
) -> None:
    table = consumer.settings.consumer.table_name
    put_row(moto_endpoint, table, "u-order", "acct-1", "Active")
    put_row(moto_endpoint, table, "u-order", "acct-1", "Cancelled")
    put_row(moto_endpoint, table, "u-order", "acct-1", "Active")

    def mine(events: list[dict[str, object]]) -> list[dict[str, object]]:
        return [e for e in events if e["keys"] == {"pk": "USER#u-order", "sk": "ENTITLEMENT#acct-1"}]

    events = mine(consumer.wait_for(lambda evs: len(mine(evs)) >= 3))
    assert [e["event_type"] for e in events] == [
        "entitlement.created",
        "entitlement.status_changed",
        "entitlement.status_changed",
    ]
    sequence = [int(str(e["sequence_number"])) for e in events]
    assert sequence == sorted(sequence)

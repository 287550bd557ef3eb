"""Through the real daemon and child: a window holding a record that cannot be decoded, while the lake
cannot be written, is parked without that record; `replay-parked` then lands every good record in the
lake exactly once and dead-letters nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from entitlements.commands._stores import Stores, build_recovery
from tests.support.kcl import dynamodb, running_consumer, stream_contents
from tests.support.lake import query_lake
from tests.support.polling import wait_for

pytestmark = pytest.mark.kcl

GOOD = 5


def row(user: str, **extra: dict[str, str]) -> dict[str, dict[str, str]]:
    return {
        "pk": {"S": f"USER#{user}"},
        "sk": {"S": "ENTITLEMENT#acct"},
        "userId": {"S": user},
        "arrayAccountId": {"S": "acct"},
        "status": {"S": "Active"},
        **extra,
    }


def test_a_poison_record_in_a_window_parked_by_a_failing_lake_never_stops_its_replay(
    moto_endpoint: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    blocker = state / "lake" / "changes"  # a file where the lake's change log folder must be
    blocker.parent.mkdir(parents=True)
    blocker.write_text("the lake cannot write here")
    with running_consumer(
        moto_endpoint,
        state,
        consumer={"handler_retry_attempts": 2, "handler_retry_max_seconds": 1.0},
    ) as consumer:
        settings = consumer.settings
        stores = Stores.from_settings(settings)
        client = dynamodb(moto_endpoint)
        table = settings.consumer.table_name
        for i in range(GOOD):
            client.put_item(TableName=table, Item=row(f"good-{i}"))
            if i == 2:  # a number no DynamoDB item can hold: the decoder refuses it
                client.put_item(TableName=table, Item=row("poison", x={"N": "1" * 45}))
        stream = stream_contents(moto_endpoint, consumer.stream_arn)
        poison = {r["eventID"] for r in stream if "x" in r["dynamodb"].get("NewImage", {})}
        good = {r["eventID"] for r in stream} - poison
        assert (len(good), len(poison)) == (GOOD, 1)

        def parked_for_the_lake() -> set[str]:
            return {
                record.sequence_number
                for batch in stores.parked
                if batch.handler == "lake"
                for record in batch.records
            }

        good_sequences = {r["dynamodb"]["SequenceNumber"] for r in stream if r["eventID"] in good}
        wait_for(
            lambda: stores.quarantine.count() == 1 and parked_for_the_lake() >= good_sequences, timeout=240
        )
        consumer.stop_all()

    blocker.unlink()
    report = build_recovery(settings).replay_parked()

    assert (report.remaining, stores.parked.count(), stores.dead_letters.count()) == (0, 0, 0)
    landed = query_lake(settings, "SELECT event_id, count(*) FROM raw_changes GROUP BY event_id")
    assert dict(landed) == dict.fromkeys(good, 1)
    assert stores.quarantine.count() == 1

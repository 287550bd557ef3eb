"""The receipt names what no erasure reaches on the consumer's source: with the Kinesis source, the
Kinesis data stream keeps the user's records until its retention ends (Kinesis deletes none before)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from config import SettingsError, SourceSettings, load_settings
from devstack.fake_array import FakeArrayServer
from processors.erasure import ErasureLedger, ErasureTargets
from processors.erasure._receipt import KINESIS_NOTE, unreached_by_erasure
from tests.processors.erasure.erasure_subscriber_helpers import Stack, erase
from tests.processors.erasure.test_erasure_end_to_end import Account

KINESIS_ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/entitlements-changes"
A_WEEK_HOURS = 168


@pytest.fixture
def targets(targets: ErasureTargets) -> ErasureTargets:
    """The worker's targets with the consumer reading a Kinesis stream kept a week."""
    return replace(
        targets, source=SourceSettings(kind="kinesis", stream_arn=KINESIS_ARN, retention_hours=A_WEEK_HOURS)
    )


def test_a_kinesis_source_is_named_unreached_with_its_retention() -> None:
    source = SourceSettings(kind="kinesis", stream_arn=KINESIS_ARN, retention_hours=A_WEEK_HOURS)
    [unreached] = unreached_by_erasure(source)
    assert (unreached.store, unreached.retention_hours, unreached.note) == (
        "kinesis",
        A_WEEK_HOURS,
        KINESIS_NOTE,
    )


def test_the_kinesis_retention_is_24_hours_unless_set() -> None:
    [unreached] = unreached_by_erasure(SourceSettings(kind="kinesis", stream_arn=KINESIS_ARN))
    assert unreached.retention_hours == 24


def test_the_dynamodb_stream_source_names_nothing_unreached() -> None:
    assert unreached_by_erasure(SourceSettings()) == ()


@pytest.mark.parametrize("hours", ["23", "8761"])
def test_a_retention_kinesis_cannot_have_is_refused_naming_the_variable(hours: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(
            environ={}, source={"kind": "kinesis", "stream_arn": KINESIS_ARN, "retention_hours": hours}
        )
    assert "SOURCE__RETENTION_HOURS" in str(refused.value).upper()
    assert hours not in str(refused.value)


def test_the_workers_receipt_names_the_kinesis_retention_and_the_erasure_is_still_answered(
    dynamodb: Any,
    streams: Any,
    table: Any,
    fake_array: FakeArrayServer,
    make_stack: Any,
    ledger: ErasureLedger,
) -> None:
    account = Account(dynamodb, streams, table, fake_array)
    stack: Stack = make_stack(handler_timeout_seconds=20, batch_timeout_seconds=10)
    request = erase(account.user)
    stack.publish(request)
    # Not a scan: it does not make the receipt unclean, so the erasure is answered as done.
    assert stack.answer_to(request.request_id).outcome == "DONE"
    [kept] = [json.loads(text) for text in ledger.receipts(account.user)]
    assert kept["version"] == 3
    assert kept["unreached"] == [{"store": "kinesis", "retention_hours": A_WEEK_HOURS, "note": KINESIS_NOTE}]

"""Raw stream records, typed by `pipeline.decode` as the consumer does, reach the cleanup handler: only
DynamoDB TTL's removal of a cleanup record deletes the account it names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from devstack.fake_array import FakeArrayServer
from pipeline.decode import decode_stream_record
from processors.cleanup import CleanupHandler
from schema.errors import RecordRejected
from schema.outcomes import OutcomeKind
from tests.processors.cleanup.cleanup_helpers import STREAM_ARN, ListSink

TTL_IDENTITY = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}


def _remove(sk: str, account: str, identity: dict[str, str] | None) -> dict[str, Any]:
    keys = {"pk": {"S": "USER#u1"}, "sk": {"S": sk}}
    record: dict[str, Any] = {
        "eventID": "7de3041dd709b024af6f29e4fa13d34c",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "eu-west-1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1772366400,
            "Keys": keys,
            "OldImage": {
                **keys,
                "userId": {"S": "u1"},
                "arrayAccountId": {"S": account},
                "ttl": {"N": "1772366000"},
                "createdAt": {"S": "2026-01-01T00:00:00.000Z"},
            },
            "SequenceNumber": "111100000000000000000001",
            "SizeBytes": 120,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }
    if identity is not None:
        record["userIdentity"] = identity
    return record


@pytest.fixture
def handler(make_handler: Callable[..., CleanupHandler]) -> CleanupHandler:
    return make_handler()


@pytest.mark.parametrize("sk", ["CLEANUP#CANCELLATION", "CLEANUP#STALE#acct-old"])
def test_a_ttl_removal_of_a_cleanup_record_deletes_the_account_it_names(
    sk: str,
    handler: CleanupHandler,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-old", "acct-new"])
    put_row("u1", "acct-old", "Cancelled")
    put_row("u1", "acct-new", "Active")
    event = decode_stream_record(_remove(sk, "acct-old", TTL_IDENTITY), stream_arn=STREAM_ARN, shard_id="s-1")
    handler.add(event)
    handler.flush()
    assert fake_array.deleted_users() == ["acct-old"]
    assert sink.kinds() == [OutcomeKind.CLEANUP_DELETED, OutcomeKind.CLEANUP_ROW_MARKED]
    assert sink.outcomes[0].source_event_id == "7de3041dd709b024af6f29e4fa13d34c"


@pytest.mark.parametrize(
    "identity",
    [
        None,
        {"PrincipalId": "someone", "Type": "Service"},
        {"PrincipalId": "dynamodb.amazonaws.com", "Type": "User"},
    ],
    ids=["service-delete", "other-principal", "not-a-service"],
)
def test_a_cleanup_record_removed_by_anyone_but_ttl_deletes_nothing(
    identity: dict[str, str] | None,
    handler: CleanupHandler,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-old"])
    put_row("u1", "acct-old", "Cancelled")
    record = _remove("CLEANUP#CANCELLATION", "acct-old", identity)
    handler.add(decode_stream_record(record, stream_arn=STREAM_ARN, shard_id="s-1"))
    handler.flush()
    assert fake_array.calls() == []
    assert sink.outcomes == []


def _without_account(record: dict[str, Any]) -> dict[str, Any]:
    del record["dynamodb"]["OldImage"]["arrayAccountId"]
    return record


def _with_numeric_account(record: dict[str, Any]) -> dict[str, Any]:
    record["dynamodb"]["OldImage"]["arrayAccountId"] = {"N": "5"}
    return record


@pytest.mark.parametrize(
    "record",
    [
        _remove("CLEANUP#STALE#acct-old", "", TTL_IDENTITY),
        _without_account(_remove("CLEANUP#STALE#acct-old", "acct-old", TTL_IDENTITY)),
        _with_numeric_account(_remove("CLEANUP#CANCELLATION", "acct-old", TTL_IDENTITY)),
    ],
    ids=["empty-account-id", "no-account-id", "numeric-account-id"],
)
def test_a_ttl_removal_of_a_cleanup_record_naming_no_account_is_rejected_for_the_dead_letter(
    record: dict[str, Any], handler: CleanupHandler, fake_array: FakeArrayServer
) -> None:
    event = decode_stream_record(record, stream_arn=STREAM_ARN, shard_id="s-1")
    with pytest.raises(RecordRejected):
        handler.add(event)
    handler.flush()
    assert fake_array.calls() == []

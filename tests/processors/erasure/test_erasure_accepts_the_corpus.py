"""Every request the contract accepts is handled without a crash at any step of this store's handling.

Each accepted body of schema/erasure-conformance-corpus.json (the strange ones included: keys holding
NUL, U+2028, brackets, quotes, astral characters; a key near the SQS body limit; year 0001 and 9999;
nine fraction digits; sendNo written as a rounding float) is published on the channel and handled by one
worker on moto, against a store that holds data for every ACCOUNT key: table rows, lake outcomes,
quarantined records and parked work. Every step runs on those keys (the table query and deletes, the
ledger, the lake mask, purge and unmask, the quarantine and parked scans, the sender), every message is
answered as its pair requires (an expired one: consumed with no answer), nothing fails or is refused,
and every log line the handling wrote formats as the service writes it, with no key or requestId in it.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from analytics import Lake, LakeHandler
from entitlements._logging import _JsonFormatter
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from processors.erasure import ErasureTargets
from processors.erasure._capabilities import Handling, handling_for
from schema.erasure import (
    ErasureRequest,
    is_expired,
    parse_erasure_message,
    parse_erasure_request,
)
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id
from schema.table import PK, user_pk
from tests.processors.erasure.erasure_subscriber_helpers import Stack, entitlement_item
from tests.schema.erasure.erasure_test_support import corpus_body, corpus_entries

SHARD = "shardId-00000001700000000000-corpus"
STREAM_ARN = "arn:aws:dynamodb:eu-west-1:000000000000:table/entitlements/stream/2026-01-01T00:00:00.000"
DYNAMODB_KEY_LIMIT = 2048  # bytes of a partition key value
SQS_BODY_LIMIT = 262_144  # bytes
PROJECT_LOGGERS = ("processors", "schema", "analytics", "pipeline", "config")
ANSWER_TYPES = {"erasure/ERASE": "erasure/ACK", "erasure/REFILE": "erasure/REFILE_ACK"}


class KeyLimitedDynamoDB:
    """The session's DynamoDB client, refusing a partition key over 2048 bytes as DynamoDB does (moto
    accepts one in a query): `ValidationException`, "Size of hashkey has exceeded the maximum size limit"."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def _check(self, values: list[Any]) -> None:
        for value in values:
            text = value.get("S") if isinstance(value, dict) else None
            if isinstance(text, str) and len(text.encode("utf-8")) > DYNAMODB_KEY_LIMIT:
                error = {"Error": {"Code": "ValidationException", "Message": "Size of hashkey has exceeded"}}
                raise ClientError(error, "Query")  # type: ignore[arg-type]

    def query(self, **kwargs: Any) -> Any:
        self._check(list(kwargs.get("ExpressionAttributeValues", {}).values()))
        return self._client.query(**kwargs)

    def batch_write_item(self, **kwargs: Any) -> Any:
        for requests in kwargs["RequestItems"].values():
            for request in requests:
                self._check([request.get("DeleteRequest", {}).get("Key", {}).get(PK)])
        return self._client.batch_write_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture
def targets(targets: ErasureTargets) -> ErasureTargets:
    return replace(targets, dynamodb=KeyLimitedDynamoDB(targets.dynamodb))


def _accepted() -> list[tuple[str, str, ErasureRequest]]:
    accepted = []
    for entry in corpus_entries():
        if entry["expected"] != "accepted":
            continue
        body = corpus_body(entry)
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        accepted.append((entry["name"], text, parse_erasure_request(text)))
    return accepted


ACCEPTED = _accepted()


def _account_keys() -> list[str]:
    keys = {
        request.key
        for _, _, request in ACCEPTED
        if handling_for(request) in (Handling.ERASE_ACCOUNT, Handling.HOLDINGS_ACCOUNT)
        and isinstance(request.key, str)
    }
    return sorted(keys)


def _hold_data_for(keys: list[str], dynamodb: Any, table: Any, lake: Lake, state_dir: Path) -> None:
    """Rows for every key in the table (where DynamoDB can key one), the lake and the consumer's stores."""
    for number, key in enumerate(keys):
        if len(user_pk(key).encode("utf-8")) <= DYNAMODB_KEY_LIMIT:
            dynamodb.put_item(
                TableName=table.table_name, Item=entitlement_item(key, f"arr-{number}", "Active")
            )
    handler = LakeHandler(lake)
    for key in keys:
        handler.add_outcome(
            OutcomeEvent(
                outcome_id=outcome_id(f"corpus-{key}", OutcomeKind.CLEANUP_DELETED),
                kind=OutcomeKind.CLEANUP_DELETED,
                occurred_at=datetime(2026, 1, 2, tzinfo=UTC),
                user_id=key,
                array_account_id="arr-x",
            )
        )
    handler.flush()
    quarantine = Quarantine(state_dir / "quarantine")
    records = []
    for number, key in enumerate(keys, start=1):
        pk = json.dumps(user_pk(key))
        raw = f'{{"eventID": "x", "dynamodb": {{"Keys": {{"pk": {{"S": {pk}}}}}}}}}'.encode()
        quarantine.put(
            raw=raw, reason="test", stream_arn=STREAM_ARN, shard_id=SHARD, sequence_number=str(number)
        )
        records.append(RawRecord(raw, str(number)))
    ParkedWork(state_dir / "parked").park(
        handler="lake", stream_arn=STREAM_ARN, shard_id=SHARD, records=records, reason="test"
    )


def _expected_answers(now: datetime) -> Counter[tuple[str, str]]:
    """(answer type, outcome or answer kind) for every message that is not expired."""
    expected: Counter[tuple[str, str]] = Counter()
    for _, _, request in ACCEPTED:
        if is_expired(request, now):
            continue
        handling = handling_for(request)
        answer_type = ANSWER_TYPES.get(request.type, "erasure/HOLDINGS")
        if handling is Handling.NOT_APPLICABLE:
            expected[(answer_type, "NOT_APPLICABLE")] += 1
        elif handling is Handling.ERASE_ACCOUNT:
            expected[(answer_type, "DONE")] += 1
        else:
            expected[(answer_type, "HOLDS_DATA")] += 1
    return expected


def _kind(answer: Any) -> tuple[str, str]:
    return answer.type, getattr(answer, "outcome", None) or answer.answer


@pytest.fixture
def handled(
    make_stack: Any,
    dynamodb: Any,
    table: Any,
    lake: Lake,
    state_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> tuple[Stack, list[Any], Counter[tuple[str, str]]]:
    _hold_data_for(_account_keys(), dynamodb, table, lake, state_dir)
    stack: Stack = make_stack(handler_timeout_seconds=60.0, batch_timeout_seconds=30.0)
    expected = _expected_answers(datetime.now(UTC))
    for package in PROJECT_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=package)
    for _, body, _ in ACCEPTED:
        stack.publish(body)
    total = sum(expected.values())
    bodies: list[str] = []

    def answered() -> bool:
        batch = stack.sqs.receive_message(
            QueueUrl=stack.channel.responses_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
        ).get("Messages", [])
        for message in batch:
            bodies.append(message["Body"])
            stack.sqs.delete_message(
                QueueUrl=stack.channel.responses_queue_url, ReceiptHandle=message["ReceiptHandle"]
            )
        return len(bodies) >= total

    stack.drive(answered, timeout=120.0)
    return stack, bodies, expected


def test_every_accepted_request_is_answered_as_its_pair_requires(handled: Any) -> None:
    _, bodies, expected = handled
    answers = [parse_erasure_message(body) for body in bodies]
    # HOLDINGS for keys whose data an earlier ERASE of the same batch removed may say HOLDS_NONE.
    seen = Counter(
        (kind[0], "HOLDS_DATA") if kind == ("erasure/HOLDINGS", "HOLDS_NONE") else kind
        for kind in map(_kind, answers)
    )
    assert seen == expected


def test_no_step_of_the_handling_fails_or_refuses_an_accepted_request(handled: Any) -> None:
    stack, _, _ = handled
    stats = stack.worker.stats
    assert (stats.refused, stats.failed, stats.metric_failures) == (0, 0, 0)
    assert stats.received >= len(ACCEPTED)


def test_every_log_line_of_the_handling_formats_and_names_no_key_or_request_id(
    handled: Any, caplog: pytest.LogCaptureFixture
) -> None:
    formatter = _JsonFormatter()
    lines = [
        formatter.format(record)
        for record in caplog.get_records("setup")  # the handling runs in the fixture
        if record.name.split(".")[0] in PROJECT_LOGGERS
    ]
    assert lines
    secrets = {request.request_id for _, _, request in ACCEPTED} | set(_account_keys())
    distinctive = {secret for secret in secrets if len(secret) >= 8}
    leaked = {secret[:20] for secret in distinctive for line in lines if secret in line}
    assert leaked == set()


def _sqs_accepts(character: str) -> bool:
    code = ord(character)
    return code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000


def test_every_answer_fits_in_an_sqs_message_and_holds_only_characters_sqs_accepts(handled: Any) -> None:
    _, bodies, _ = handled
    assert max(len(body.encode("utf-8")) for body in bodies) <= SQS_BODY_LIMIT
    assert all(_sqs_accepts(character) for body in bodies for character in set(body))

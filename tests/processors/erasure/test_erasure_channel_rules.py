"""The contract's steps before any work: an invalid body is never answered and reaches the dead-letter
queue after five receives; an expired valid message is consumed with no answer; ADDRESS pairs and REFILE
are answered NOT_APPLICABLE at once and counted in the ErasureNotApplicable metric."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import REGISTRY

from processors.erasure import ErasureLedger
from processors.erasure._answers import NOT_APPLICABLE_METRIC
from schema.erasure import (
    CHANNEL_CONSTANTS,
    AckResponse,
    CheckRequest,
    ClassifyRequest,
    EraseRequest,
    HoldingsResponse,
    RefileAckResponse,
    RefileRequest,
)
from schema.table import user_pk
from tests.processors.erasure.erasure_subscriber_helpers import Stack, cleanup_item, entitlement_item, erase

INVALID = json.dumps({"type": "erasure/ERASE", "requestId": "never-answered", "sendNo": 1})


def _dead_letters(stack: Stack) -> list[dict[str, Any]]:
    return stack.sqs.receive_message(QueueUrl=stack.channel.dlq_url, MaxNumberOfMessages=10).get(
        "Messages", []
    )


def test_an_invalid_body_reaches_the_dead_letter_queue_after_five_receives_and_is_never_answered(
    make_stack: Any,
) -> None:
    stack: Stack = make_stack(handler_timeout_seconds=0.5, batch_timeout_seconds=0.5)  # visibility 3 s
    stack.publish(INVALID)
    stack.drive(lambda: stack.queue_depths(stack.channel.dlq_url) > 0, timeout=90)
    assert stack.worker.stats.refused == CHANNEL_CONSTANTS.max_receive_count == 5
    assert [message["Body"] for message in _dead_letters(stack)] == [INVALID]
    assert stack.responses.collect() == []
    assert stack.queue_depths(stack.channel.queue_url) == 0


def test_a_valid_answer_sent_as_a_request_is_refused_like_an_invalid_body(make_stack: Any) -> None:
    stack: Stack = make_stack()
    ack = AckResponse(request_id="r", send_no=1, subscriber="other", outcome="DONE")
    stack.publish(ack.model_dump_json(by_alias=True))
    stack.drive(lambda: stack.worker.stats.refused >= 1)
    assert stack.responses.collect() == []


def test_an_expired_message_is_consumed_with_no_answer_and_no_work(
    make_stack: Any, dynamodb: Any, table: Any, ledger: ErasureLedger
) -> None:
    user = f"user-{uuid.uuid4().hex[:8]}"
    dynamodb.put_item(TableName=table.table_name, Item=entitlement_item(user, "arr-1", "Active"))
    dynamodb.put_item(TableName=table.table_name, Item=cleanup_item(user, "arr-1", cancellation=True))
    stack: Stack = make_stack()
    stack.publish(erase(user, expires_in=-1))
    stack.drive(lambda: stack.worker.stats.expired >= 1)
    assert stack.responses.collect() == []
    assert stack.queue_depths(stack.channel.queue_url) == 0
    assert stack.queue_depths(stack.channel.dlq_url) == 0
    items = dynamodb.query(
        TableName=table.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": user_pk(user)}},
    )["Items"]
    assert len(items) == 2
    assert not ledger.is_erased(user)


def _address_requests() -> list[Any]:
    expires = datetime.now(UTC) + timedelta(seconds=CHANNEL_CONSTANTS.expiry_period_seconds)
    tag = uuid.uuid4().hex[:8]
    address = f"someone-{tag}@example.com"
    return [
        EraseRequest(request_id=f"e-{tag}", send_no=2, expires_at=expires, key_kind="ADDRESS", key=address),
        CheckRequest(request_id=f"c-{tag}", expires_at=expires, key_kind="ADDRESS", key=address),
        ClassifyRequest(request_id=f"k-{tag}", expires_at=expires, key_kind="ADDRESS", key=address),
        RefileRequest(
            request_id=f"r-{tag}",
            send_no=4,
            expires_at=expires,
            key_kind="ADDRESS",
            from_=address,
            to="quarantine+hold-1@erasure.invalid",
            account_id=f"user-{tag}",
        ),
    ]


def test_address_pairs_and_refile_are_answered_not_applicable(make_stack: Any) -> None:
    stack: Stack = make_stack()
    requests = _address_requests()
    for request in requests:
        stack.publish(request)
    stack.drive(lambda: len(stack.responses.collect()) >= len(requests))
    answers = {answer.request_id: answer for answer in stack.responses.seen}
    erase_answer, check_answer, classify_answer, refile_answer = (answers[r.request_id] for r in requests)
    assert isinstance(erase_answer, AckResponse) and erase_answer.outcome == "NOT_APPLICABLE"
    assert erase_answer.send_no == 2
    for holdings in (check_answer, classify_answer):
        assert isinstance(holdings, HoldingsResponse) and holdings.answer == "NOT_APPLICABLE"
        assert (holdings.key_kind, holdings.key) == ("ADDRESS", requests[1].key)
    assert isinstance(refile_answer, RefileAckResponse) and refile_answer.outcome == "NOT_APPLICABLE"
    assert refile_answer.send_no == 4
    assert {answer.subscriber for answer in answers.values()} == {"entitlements"}


def test_not_applicable_answers_are_counted_in_the_erasure_not_applicable_metric(
    make_stack: Any, cloudwatch: Any
) -> None:
    stack: Stack = make_stack()
    requests = _address_requests()
    for request in requests:
        stack.publish(request)
    stack.drive(lambda: stack.worker.stats.not_applicable >= len(requests))
    now = datetime.now(UTC)
    statistics = cloudwatch.get_metric_statistics(
        Namespace=stack.settings.metrics_namespace,
        MetricName=NOT_APPLICABLE_METRIC,
        StartTime=now - timedelta(minutes=10),
        EndTime=now + timedelta(minutes=10),
        Period=60,
        Statistics=["Sum"],
    )["Datapoints"]
    assert sum(point["Sum"] for point in statistics) == len(requests)
    assert stack.worker.stats.metric_failures == 0


def test_not_applicable_answers_are_counted_in_the_processs_figures_by_answer(make_stack: Any) -> None:
    def figure(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    before = figure("entitlements_erasure_not_applicable_total")
    before_acks = figure("entitlements_erasure_answers_total", answer="ACK/NOT_APPLICABLE")
    stack: Stack = make_stack()
    requests = _address_requests()
    for request in requests:
        stack.publish(request)
    stack.drive(lambda: stack.worker.stats.not_applicable >= len(requests))
    assert figure("entitlements_erasure_not_applicable_total") - before == len(requests)
    assert figure("entitlements_erasure_answers_total", answer="ACK/NOT_APPLICABLE") - before_acks == 1

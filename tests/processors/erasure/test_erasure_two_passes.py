"""Two passes through the store's own queue: pass two is the same body re-enqueued with DelaySeconds and
the store's own pass-two token (never an extra body field), recognised only with the ledger's record of
pass one, never from an attribute a publisher can set; it catches what landed between the passes, and any
failed step is redelivered by SQS harmlessly until the ACK goes out."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from devstack.fake_array import FakeArrayServer
from processors.erasure import ErasureTargets
from processors.erasure._intake import PASS_TWO_TOKEN_ATTRIBUTE
from schema.erasure import AckResponse
from schema.table import user_pk
from tests.processors.erasure.erasure_subscriber_helpers import Stack, body_of, entitlement_item, erase


def _items(dynamodb: Any, table: Any, user: str) -> list[dict[str, Any]]:
    return dynamodb.query(
        TableName=table.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": user_pk(user)}},
        ConsistentRead=True,
    )["Items"]


def test_pass_two_is_the_same_body_with_the_stores_token_and_the_delay(
    make_stack: Any, targets: ErasureTargets
) -> None:
    stack: Stack = make_stack(pass_two_delay_seconds=2)
    request = erase(f"user-{uuid.uuid4().hex[:8]}")
    stack.publish(request)
    stack.drive(lambda: stack.worker.stats.pass_one == 1)
    assert stack.responses.collect() == []  # no ACK after the first pass
    immediately = stack.sqs.receive_message(QueueUrl=stack.channel.queue_url, WaitTimeSeconds=0)
    assert not immediately.get("Messages")  # delayed
    time.sleep(2.2)
    copy = stack.sqs.receive_message(
        QueueUrl=stack.channel.queue_url, WaitTimeSeconds=2, MessageAttributeNames=["All"]
    )["Messages"][0]
    assert copy["Body"] == body_of(request)
    token = targets.ledger.pass_two_token(body_of(request))
    assert copy["MessageAttributes"] == {
        PASS_TWO_TOKEN_ATTRIBUTE: {"DataType": "String", "StringValue": token}
    }
    entry = targets.ledger.entry(request.key)
    assert entry is not None and entry.passes == 1 and entry.completed_at is None


def test_pass_two_catches_a_row_written_between_the_passes(
    make_stack: Any, dynamodb: Any, table: Any, fake_array: FakeArrayServer
) -> None:
    user = f"user-{uuid.uuid4().hex[:8]}"
    dynamodb.put_item(TableName=table.table_name, Item=entitlement_item(user, "arr-first", "Active"))
    fake_array.add_users(["arr-first"])
    stack: Stack = make_stack(pass_two_delay_seconds=2)
    request = erase(user)
    stack.publish(request)
    stack.drive(lambda: stack.worker.stats.pass_one == 1)
    assert _items(dynamodb, table, user) == []
    late = f"arr-late-{uuid.uuid4().hex[:6]}"
    dynamodb.put_item(TableName=table.table_name, Item=entitlement_item(user, late, "Active"))
    fake_array.add_users([late])
    ack = stack.answer_to(request.request_id)
    assert isinstance(ack, AckResponse) and ack.outcome == "DONE"
    assert _items(dynamodb, table, user) == []
    assert not fake_array.has_user(late)


def test_a_failed_step_is_redelivered_and_answered_once_it_succeeds(
    make_stack: Any, dynamodb: Any, table: Any, fake_array: FakeArrayServer
) -> None:
    user = f"user-{uuid.uuid4().hex[:8]}"
    dynamodb.put_item(TableName=table.table_name, Item=entitlement_item(user, "arr-down", "Active"))
    fake_array.add_users(["arr-down"])
    fake_array.set_faults(error_rate=1.0)
    stack: Stack = make_stack(handler_timeout_seconds=0.5, batch_timeout_seconds=0.5)
    request = erase(user)
    stack.publish(request)
    stack.drive(lambda: stack.worker.stats.failed >= 1)
    assert len(_items(dynamodb, table, user)) == 1  # the map to the Array account is kept
    fake_array.clear_faults()
    ack = stack.answer_to(request.request_id)
    assert isinstance(ack, AckResponse) and ack.outcome == "DONE"
    assert _items(dynamodb, table, user) == [] and not fake_array.has_user("arr-down")
    assert len(stack.responses.for_request(request.request_id)) == 1  # one ACK only


def test_a_second_broadcast_of_a_completed_erasure_is_answered_done_again(make_stack: Any) -> None:
    stack: Stack = make_stack()
    user = f"user-{uuid.uuid4().hex[:8]}"
    first, second = erase(user, send_no=1), erase(user, send_no=2)
    stack.publish(first)
    assert stack.answer_to(first.request_id).outcome == "DONE"
    stack.publish(second.model_copy(update={"request_id": first.request_id}))
    again = stack.answer_to(first.request_id)
    assert (again.outcome, again.send_no) == ("DONE", 2)


def test_a_request_published_with_the_attribute_erasure_pass_2_runs_both_passes_before_done(
    make_stack: Any, targets: ErasureTargets
) -> None:
    stack: Stack = make_stack(pass_two_delay_seconds=2)
    request = erase(f"user-{uuid.uuid4().hex[:8]}")
    stack.sns.publish(
        TopicArn=stack.channel.topic_arn,
        Message=body_of(request),
        MessageAttributes={"ErasurePass": {"DataType": "Number", "StringValue": "2"}},
    )
    stack.drive(lambda: stack.worker.stats.pass_one == 1)
    assert stack.responses.collect() == []  # taken as a first pass: no DONE yet
    ack = stack.answer_to(request.request_id)
    assert isinstance(ack, AckResponse) and ack.outcome == "DONE"
    assert (stack.worker.stats.pass_one, stack.worker.stats.done) == (1, 1)
    entry = targets.ledger.entry(request.key)
    assert entry is not None and entry.passes == 2 and entry.completed_at is not None


def test_a_token_the_store_did_not_make_is_taken_as_a_first_pass(make_stack: Any) -> None:
    stack: Stack = make_stack(pass_two_delay_seconds=2)
    request = erase(f"user-{uuid.uuid4().hex[:8]}")
    stack.sqs.send_message(
        QueueUrl=stack.channel.queue_url,
        MessageBody=body_of(request),
        MessageAttributes={PASS_TWO_TOKEN_ATTRIBUTE: {"DataType": "String", "StringValue": "0" * 64}},
    )
    stack.drive(lambda: stack.worker.stats.pass_one == 1)
    assert stack.responses.collect() == []
    assert stack.worker.stats.done == 0


def test_the_stores_own_token_is_no_second_pass_without_the_ledgers_record_of_pass_one(
    make_stack: Any, targets: ErasureTargets
) -> None:
    stack: Stack = make_stack(pass_two_delay_seconds=2)
    request = erase(f"user-{uuid.uuid4().hex[:8]}")
    token = targets.ledger.pass_two_token(body_of(request))
    stack.sqs.send_message(
        QueueUrl=stack.channel.queue_url,
        MessageBody=body_of(request),
        MessageAttributes={PASS_TWO_TOKEN_ATTRIBUTE: {"DataType": "String", "StringValue": token}},
    )
    stack.drive(lambda: stack.worker.stats.pass_one == 1)
    assert stack.responses.collect() == []


def test_several_pollers_answer_every_request_once(make_stack: Any) -> None:
    stack: Stack = make_stack()
    requests = [erase(f"user-{uuid.uuid4().hex[:8]}") for _ in range(6)]
    for request in requests:
        stack.publish(request)
    stop = threading.Event()
    runner = threading.Thread(target=stack.worker.run, args=(stop,), kwargs={"wait_seconds": 1, "pollers": 3})
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while len(stack.responses.collect()) < len(requests) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        runner.join(timeout=30)
    answered = sorted(answer.request_id for answer in stack.responses.seen)
    assert answered == sorted(request.request_id for request in requests)
    assert {answer.outcome for answer in stack.responses.seen} == {"DONE"}

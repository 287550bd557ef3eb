"""adapters/sqs_runner.py: the one receive / handle / delete loop, on moto's SQS."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from adapters.sqs_runner import Message, SqsRunner
from schema.aws_errors import AwsRetryableError, AwsTerminalError
from tests.support.dynamodb import client


@pytest.fixture(scope="module")
def sqs(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "sqs")


def _queue(sqs: Any, visibility_seconds: int) -> str:
    name = f"runner-{uuid.uuid4().hex[:8]}"
    attributes = {"VisibilityTimeout": str(visibility_seconds)}
    url: str = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return url


@pytest.fixture
def queue_url(sqs: Any) -> str:
    """A short visibility timeout, so that what is left on the queue is seen again within a test."""
    return _queue(sqs, 1)


@pytest.fixture
def slow_queue_url(sqs: Any) -> str:
    """What is left on the queue stays out of sight for the test (a drain ends on it)."""
    return _queue(sqs, 60)


def _send(sqs: Any, queue_url: str, bodies: Sequence[str]) -> None:
    for start in range(0, len(bodies), 10):
        chunk = bodies[start : start + 10]
        sqs.send_message_batch(
            QueueUrl=queue_url, Entries=[{"Id": str(n), "MessageBody": body} for n, body in enumerate(chunk)]
        )


def _left(sqs: Any, queue_url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=names)["Attributes"]
    return sum(int(attributes[name]) for name in names)


def _bodies(messages: Sequence[Message]) -> list[str]:
    return sorted(str(message["Body"]) for message in messages)


def test_receive_up_to_gathers_several_receives_until_the_count(sqs: Any, queue_url: str) -> None:
    _send(sqs, queue_url, [f"m{n:02}" for n in range(25)])
    received = SqsRunner(sqs, queue_url).receive_up_to(25, wait_seconds=1)
    assert _bodies(received) == [f"m{n:02}" for n in range(25)]


def test_only_the_messages_the_batch_handler_finished_are_deleted(sqs: Any, queue_url: str) -> None:
    _send(sqs, queue_url, ["keep", "done-1", "done-2"])
    runner = SqsRunner(sqs, queue_url)
    seen: list[str] = []

    def handle(messages: list[Message]) -> list[Message]:
        seen.extend(_bodies(messages))
        return [message for message in messages if str(message["Body"]).startswith("done")]

    assert runner.poll_batch(handle, batch_size=10, wait_seconds=1) == 3
    assert seen == ["done-1", "done-2", "keep"]
    assert _bodies(runner.receive_up_to(10, wait_seconds=5)) == ["keep"]  # visible again after 1 s


def test_the_batch_handler_sees_the_whole_batch_at_once(sqs: Any, queue_url: str) -> None:
    _send(sqs, queue_url, [f"m{n}" for n in range(15)])
    sizes: list[int] = []

    def handle(messages: list[Message]) -> list[Message]:
        sizes.append(len(messages))
        return messages

    SqsRunner(sqs, queue_url).poll_batch(handle, batch_size=15, wait_seconds=1)
    assert sizes == [15]
    assert _left(sqs, queue_url) == 0


def test_a_failing_batch_handler_deletes_nothing_and_the_loop_keeps_running(sqs: Any, queue_url: str) -> None:
    _send(sqs, queue_url, ["a", "b"])
    stop = threading.Event()
    calls = [0]

    def handle(messages: list[Message]) -> list[Message]:
        calls[0] += 1
        if calls[0] == 1:
            raise AwsRetryableError("test step", "Throttling")
        stop.set()
        return messages

    SqsRunner(sqs, queue_url).run_batches(stop, handle, wait_seconds=1, error_pause_seconds=0.1)
    assert calls[0] >= 2  # the first failure was paused on, then the redelivered batch handled
    assert _left(sqs, queue_url) == 0


def test_run_each_deletes_what_each_handle_finished_and_leaves_the_rest(
    sqs: Any, slow_queue_url: str
) -> None:
    _send(sqs, slow_queue_url, [f"ok-{n}" for n in range(12)] + ["no-1", "no-2"])
    handled: list[str] = []
    lock = threading.Lock()
    deleted = [0]

    def handle(message: Message) -> bool:
        with lock:
            handled.append(str(message["Body"]))
        return str(message["Body"]).startswith("ok")

    def counted(count: int) -> None:
        deleted[0] += count

    SqsRunner(sqs, slow_queue_url).run_each(
        threading.Event(), handle, concurrency=4, drain=True, on_deleted=counted, ack_interval_seconds=0.05
    )
    assert sorted(handled) == sorted([f"ok-{n}" for n in range(12)] + ["no-1", "no-2"])  # each once
    assert deleted[0] == 12
    assert _left(sqs, slow_queue_url) == 2  # the two it did not finish, out of sight until redelivered


def test_run_each_deletes_nothing_while_before_delete_says_the_outcomes_did_not_land(
    sqs: Any, slow_queue_url: str
) -> None:
    _send(sqs, slow_queue_url, ["a", "b", "c"])
    runner = SqsRunner(sqs, slow_queue_url)
    runner.run_each(
        threading.Event(),
        lambda _message: True,
        concurrency=2,
        drain=True,
        before_delete=lambda _count: False,
    )
    assert _left(sqs, slow_queue_url) == 3


def test_run_each_runs_at_most_concurrency_handles_at_once(sqs: Any, slow_queue_url: str) -> None:
    _send(sqs, slow_queue_url, [f"m{n}" for n in range(20)])
    lock = threading.Lock()
    now = [0]
    most = [0]
    release = threading.Event()

    def handle(_message: Message) -> bool:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        release.wait(0.05)
        with lock:
            now[0] -= 1
        return True

    SqsRunner(sqs, slow_queue_url).run_each(threading.Event(), handle, concurrency=3, drain=True)
    assert 2 <= most[0] <= 3  # handled side by side, never more than three at once
    assert _left(sqs, slow_queue_url) == 0


def test_a_failed_delete_is_reported_by_receipt_handle_not_raised(sqs: Any, queue_url: str) -> None:
    _send(sqs, queue_url, ["a"])
    runner = SqsRunner(sqs, queue_url)
    [message] = runner.receive_up_to(1, wait_seconds=1)
    sqs.delete_queue(QueueUrl=queue_url)
    handle = str(message["ReceiptHandle"])
    assert list(runner.delete([message])) == [handle]


def test_a_receive_failure_is_the_projects_aws_error(sqs: Any, queue_url: str) -> None:
    sqs.delete_queue(QueueUrl=queue_url)
    with pytest.raises((AwsRetryableError, AwsTerminalError)):
        SqsRunner(sqs, queue_url).receive()


def test_the_attributes_asked_for_come_with_each_message(sqs: Any, queue_url: str) -> None:
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody="x",
        MessageAttributes={"Token": {"DataType": "String", "StringValue": "t"}},
    )
    runner = SqsRunner(
        sqs, queue_url, attribute_names=["ApproximateReceiveCount"], message_attribute_names=["Token"]
    )
    [message] = runner.receive_up_to(1, wait_seconds=1)
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    assert message["MessageAttributes"]["Token"]["StringValue"] == "t"

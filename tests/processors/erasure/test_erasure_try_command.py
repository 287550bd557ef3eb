"""`entitlements erasure try` (entitlements/commands/erasure.py) against the session's moto server: it
publishes a valid request on the erasure topic and prints this store's answer from the responses queue."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from config import load_settings
from entitlements.commands.erasure import app
from entitlements.compose import erasure_worker
from pipeline.tables import create_table
from schema.erasure import (
    CHANNEL_CONSTANTS,
    CheckRequest,
    ClassifyRequest,
    EraseRequest,
    HoldingsResponse,
    parse_erasure_message,
    serialize_erasure_message,
)

runner = CliRunner()
KEY = "acct-try-7d1f"


@pytest.fixture
def env(moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:10]
    values = {
        "ENTITLEMENTS_AWS__ENDPOINT_URL": moto_endpoint,
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": "testing",
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": "testing",
        "ENTITLEMENTS_ERASURE__TOPIC_NAME": f"erasure-requests-{suffix}",
        "ENTITLEMENTS_ERASURE__QUEUE_NAME": f"entitlements-erasure-{suffix}",
        "ENTITLEMENTS_ERASURE__RESPONSES_QUEUE_NAME": f"erasure-responses-{suffix}",
        "ENTITLEMENTS_ERASURE__HANDLER_TIMEOUT_SECONDS": "2",
        "ENTITLEMENTS_ERASURE__BATCH_TIMEOUT_SECONDS": "2",
        "ENTITLEMENTS_CONSUMER__TABLE_NAME": f"entitlements-{suffix}",
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state"),
        "ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake"),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def channel(env: dict[str, str]) -> dict[str, str]:
    result = runner.invoke(app, ["setup"], env=env)
    assert result.exit_code == 0, result.output
    return env


@pytest.fixture
def worker(channel: dict[str, str], dynamodb: Any) -> Iterator[None]:
    """`entitlements erasure worker` as the command builds it, polling in a thread."""
    settings = load_settings()
    create_table(dynamodb, settings.consumer.table_name, sleep=lambda _: None)
    stop = threading.Event()
    with erasure_worker(settings, settings.erasure, wait_seconds=1) as running:
        thread = threading.Thread(target=running.run, args=(stop,), kwargs={"wait_seconds": 1}, daemon=True)
        thread.start()
        yield
        stop.set()
        thread.join(timeout=30)


def published(sqs: Any, env: dict[str, str]) -> list[str]:
    """The bodies on the store's erasure queue (what the topic delivered), taken off it."""
    url = sqs.get_queue_url(QueueName=env["ENTITLEMENTS_ERASURE__QUEUE_NAME"])["QueueUrl"]
    bodies: list[str] = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
        "Messages", []
    ):
        for message in messages:
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


@pytest.mark.usefixtures("worker")
def test_a_check_is_answered_and_the_answer_printed(channel: dict[str, str]) -> None:
    result = runner.invoke(
        app, ["try", "CHECK", "--key-kind", "ACCOUNT", "--key", KEY, "--wait", "60"], env=channel
    )
    assert result.exit_code == 0, result.output
    answer = parse_erasure_message(result.stdout)
    assert isinstance(answer, HoldingsResponse)
    assert (answer.key, answer.answer) == (KEY, "HOLDS_NONE")
    assert answer.request_id.startswith("try-")
    assert KEY not in result.stderr
    assert answer.request_id not in result.stderr


def test_a_check_goes_out_valid_without_a_send_no_expiring_after_the_channels_period(
    channel: dict[str, str], sqs: Any
) -> None:
    before = datetime.now(UTC)
    result = runner.invoke(
        app, ["try", "CHECK", "--key-kind", "ACCOUNT", "--key", KEY, "--wait", "1"], env=channel
    )
    [body] = published(sqs, channel)
    request = parse_erasure_message(body)
    assert isinstance(request, CheckRequest)
    assert "sendNo" not in json.loads(body)
    period = timedelta(seconds=CHANNEL_CONSTANTS.expiry_period_seconds)
    assert before + period - timedelta(seconds=1) <= request.expires_at <= datetime.now(UTC) + period
    assert result.exit_code == 1  # nobody answered within the wait


def test_an_erase_carries_send_no_one_and_a_classify_none(channel: dict[str, str], sqs: Any) -> None:
    for kind in ("ERASE", "CLASSIFY"):
        arguments = ["try", kind, "--key-kind", "ADDRESS", "--key", "someone@example.com", "--wait", "1"]
        runner.invoke(app, arguments, env=channel)
    bodies = {json.loads(body)["type"]: body for body in published(sqs, channel)}
    erase = parse_erasure_message(bodies["erasure/ERASE"])
    assert isinstance(erase, EraseRequest)
    assert erase.send_no == 1
    assert isinstance(parse_erasure_message(bodies["erasure/CLASSIFY"]), ClassifyRequest)
    assert "sendNo" not in json.loads(bodies["erasure/CLASSIFY"])


def test_no_answer_within_the_wait_is_one_line_and_exit_one(channel: dict[str, str]) -> None:
    result = runner.invoke(
        app, ["try", "CHECK", "--key-kind", "ACCOUNT", "--key", KEY, "--wait", "1"], env=channel
    )
    assert result.exit_code == 1
    assert "no answer within 1 s" in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_a_request_the_contract_refuses_names_the_rule_not_the_key_and_publishes_nothing(
    channel: dict[str, str], sqs: Any
) -> None:
    address = "Someone@Example.com"  # an ADDRESS key holds no A to Z
    result = runner.invoke(app, ["try", "CHECK", "--key-kind", "ADDRESS", "--key", address], env=channel)
    assert result.exit_code == 2
    assert "the contract refuses this request: $.key" in result.stderr
    assert address not in result.output
    assert published(sqs, channel) == []


def test_send_no_on_a_type_without_one_is_refused(channel: dict[str, str], sqs: Any) -> None:
    result = runner.invoke(
        app, ["try", "CHECK", "--key-kind", "ACCOUNT", "--key", KEY, "--send-no", "2"], env=channel
    )
    assert result.exit_code == 2
    assert "CHECK has no sendNo" in result.stderr
    assert published(sqs, channel) == []


def test_a_channel_not_set_up_says_to_run_setup(env: dict[str, str]) -> None:
    result = runner.invoke(
        app, ["try", "CHECK", "--key-kind", "ACCOUNT", "--key", KEY, "--wait", "1"], env=env
    )
    assert result.exit_code == 2
    assert "run entitlements erasure setup" in result.stderr


def test_another_requests_answer_is_left_on_the_responses_queue(channel: dict[str, str], sqs: Any) -> None:
    url = sqs.get_queue_url(QueueName=channel["ENTITLEMENTS_ERASURE__RESPONSES_QUEUE_NAME"])["QueueUrl"]
    other = HoldingsResponse(
        request_id="req-someone-else", subscriber="other", key_kind="ACCOUNT", key="x", answer="HOLDS_NONE"
    )
    sqs.send_message(QueueUrl=url, MessageBody=serialize_erasure_message(other))
    runner.invoke(app, ["try", "CHECK", "--key-kind", "ACCOUNT", "--key", KEY, "--wait", "2"], env=channel)
    [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert parse_erasure_message(message["Body"]).request_id == "req-someone-else"

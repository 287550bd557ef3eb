"""`entitlements erasure setup` and `entitlements erasure worker` (and the worker as the command builds
it), against the session's moto server."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from config import load_settings
from entitlements.commands.erasure import app, erasure_settings
from entitlements.compose import erasure_worker
from pipeline.tables import create_table
from schema.erasure import ErasureEnvironmentError, parse_erasure_message, serialize_erasure_message
from tests.processors.erasure.erasure_subscriber_helpers import check

runner = CliRunner()


@pytest.fixture
def env(moto_endpoint: str, tmp_path: Path) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:10]
    return {
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


def test_setup_creates_the_channel_and_says_where_it_is(env: dict[str, str], sqs: Any) -> None:
    result = runner.invoke(app, ["setup"], env=env)
    assert result.exit_code == 0, result.output
    assert "visibility timeout 12 s, maxReceiveCount 5, raw delivery, no filter policy" in result.output
    url = sqs.get_queue_url(QueueName=env["ENTITLEMENTS_ERASURE__QUEUE_NAME"])["QueueUrl"]
    assert f"queue: {url}" in result.output
    assert runner.invoke(app, ["setup"], env=env).exit_code == 0  # idempotent


@pytest.mark.parametrize(
    "extra",
    [
        {"ENTITLEMENTS_ERASURE__MAX_RECEIVE_COUNT": "6"},
        {"ENTITLEMENTS_ERASURE__HANDLER_TIMEOUT_SECONDS": "61"},
        {"ERASURE_PASS_TWO_DELAY_SECONDS": "301", "ERASURE_BATCH_TIMEOUT_SECONDS": "1"},
        {"ERASURE_PASS_TWO_DELAY_SECONDS": "10"},  # the contract's pair: both or neither
        {"ENTITLEMENTS_ERASURE__PASS_TWO_DELAY_SECONDS": "5"},  # not above the 5 s commit interval
    ],
    ids=[
        "max-receive-count",
        "handler-timeout",
        "contract-pass-two-delay",
        "contract-half-set",
        "below-commit",
    ],
)
def test_the_worker_and_setup_refuse_to_start_above_a_cap(env: dict[str, str], extra: dict[str, str]) -> None:
    for command in ("worker", "setup"):
        result = runner.invoke(app, [command], env={**env, **extra})
        assert result.exit_code == 2
        assert "refusing to start" in result.output


def test_the_contracts_variables_win_over_the_settings_when_set() -> None:
    settings = load_settings()
    chosen = erasure_settings(
        settings, {"ERASURE_PASS_TWO_DELAY_SECONDS": "7", "ERASURE_BATCH_TIMEOUT_SECONDS": "3"}
    )
    assert (chosen.pass_two_delay_seconds, chosen.batch_timeout_seconds) == (7, 3.0)
    assert erasure_settings(settings, {}) == settings.erasure
    with pytest.raises(ErasureEnvironmentError):
        erasure_settings(
            settings, {"ERASURE_PASS_TWO_DELAY_SECONDS": "0", "ERASURE_BATCH_TIMEOUT_SECONDS": "61"}
        )


def test_the_worker_as_the_command_builds_it_answers_on_the_channel(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, sqs: Any, sns: Any, dynamodb: Any
) -> None:
    assert runner.invoke(app, ["setup"], env=env).exit_code == 0
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    create_table(dynamodb, settings.consumer.table_name, sleep=lambda _: None)
    topic = sns.create_topic(Name=settings.erasure.topic_name)["TopicArn"]
    request = check("nobody-at-all")
    sns.publish(TopicArn=topic, Message=serialize_erasure_message(request))
    with erasure_worker(settings, settings.erasure, wait_seconds=1) as worker:
        worker.verify_queue()
        worker.poll_once(wait_seconds=1)
    responses_url = sqs.get_queue_url(QueueName=settings.erasure.responses_queue_name)["QueueUrl"]
    [message] = sqs.receive_message(QueueUrl=responses_url, WaitTimeSeconds=1)["Messages"]
    answer = parse_erasure_message(message["Body"])
    assert (answer.request_id, answer.answer) == (request.request_id, "HOLDS_NONE")

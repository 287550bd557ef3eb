"""Timing within the caps: the worker refuses to start with a setting above its channel cap, or on a queue
whose visibility timeout is not exactly 6 x its handler timeout; `ensure_erasure_channel` (erasure setup)
builds the channel from the channel constants."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from processors.erasure import (
    ErasureConfigError,
    ErasureTargets,
    ErasureWorker,
    checked_timings,
    ensure_erasure_channel,
)
from processors.erasure._setup import dead_letter_queue_name
from schema.clock import SystemClock
from schema.erasure import CHANNEL_CONSTANTS
from tests.processors.erasure.conftest import erasure_settings


def test_settings_at_every_cap_are_accepted() -> None:
    timings = checked_timings(
        erasure_settings(
            handler_timeout_seconds=60,
            max_receive_count=5,
            pass_two_delay_seconds=300,
            batch_timeout_seconds=60,
        )
    )
    assert timings.visibility_timeout_seconds == 360 == CHANNEL_CONSTANTS.visibility_timeout_cap_seconds


@pytest.mark.parametrize(
    "overrides",
    [
        {"handler_timeout_seconds": 61},
        {"max_receive_count": 6},
        {"pass_two_delay_seconds": 301},
        {"handler_timeout_seconds": 60, "batch_timeout_seconds": 61},
        {"handler_timeout_seconds": 10, "batch_timeout_seconds": 11},
    ],
    ids=["handler-timeout", "max-receive-count", "pass-two-delay", "batch-timeout", "batch-above-handler"],
)
def test_a_setting_above_its_cap_refuses_to_start(
    overrides: dict[str, Any], sqs: Any, cloudwatch: Any, targets: ErasureTargets
) -> None:
    settings = erasure_settings(**overrides)
    with pytest.raises(ErasureConfigError):
        checked_timings(settings)
    with pytest.raises(ErasureConfigError):
        ErasureWorker(
            settings=settings,
            sqs=sqs,
            cloudwatch=cloudwatch,
            queue_url="http://127.0.0.1/unused",
            responses_queue_url="http://127.0.0.1/unused",
            targets=targets,
            clock=SystemClock(),
        )


def test_a_handler_timeout_whose_visibility_is_not_whole_seconds_is_refused() -> None:
    with pytest.raises(ErasureConfigError, match="whole number"):
        checked_timings(erasure_settings(handler_timeout_seconds=0.3, batch_timeout_seconds=0.3))


def test_the_visibility_timeout_is_exactly_six_times_the_handler_timeout() -> None:
    assert (
        checked_timings(
            erasure_settings(handler_timeout_seconds=0.5, batch_timeout_seconds=0.5)
        ).visibility_timeout_seconds
        == 3
    )
    assert checked_timings(erasure_settings(handler_timeout_seconds=30)).visibility_timeout_seconds == 180


def test_setup_builds_queue_dead_letter_queue_subscription_and_responses_queue(sqs: Any, sns: Any) -> None:
    settings = erasure_settings(handler_timeout_seconds=1.0, batch_timeout_seconds=1.0, max_receive_count=5)
    channel = ensure_erasure_channel(sqs, sns, settings)
    queue = sqs.get_queue_attributes(QueueUrl=channel.queue_url, AttributeNames=["All"])["Attributes"]
    assert queue["VisibilityTimeout"] == "6"
    assert queue["MessageRetentionPeriod"] == "86400"
    redrive = json.loads(queue["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == channel.dlq_arn and int(redrive["maxReceiveCount"]) == 5
    dlq = sqs.get_queue_attributes(QueueUrl=channel.dlq_url, AttributeNames=["All"])["Attributes"]
    assert dlq["MessageRetentionPeriod"] == "86400"
    assert channel.dlq_url.endswith(dead_letter_queue_name(settings))
    responses = sqs.get_queue_attributes(QueueUrl=channel.responses_queue_url, AttributeNames=["All"])
    assert responses["Attributes"]["MessageRetentionPeriod"] == "86400"
    subscription = sns.get_subscription_attributes(SubscriptionArn=channel.subscription_arn)["Attributes"]
    assert subscription["RawMessageDelivery"] == "true"
    assert subscription["Endpoint"] == channel.queue_arn and subscription["TopicArn"] == channel.topic_arn
    assert not subscription.get("FilterPolicy")


def test_setup_is_idempotent(sqs: Any, sns: Any) -> None:
    settings = erasure_settings()
    assert ensure_erasure_channel(sqs, sns, settings) == ensure_erasure_channel(sqs, sns, settings)


def test_setup_refuses_a_subscription_with_a_filter_policy(sqs: Any, sns: Any) -> None:
    settings = erasure_settings()
    channel = ensure_erasure_channel(sqs, sns, settings)
    sns.set_subscription_attributes(
        SubscriptionArn=channel.subscription_arn,
        AttributeName="FilterPolicy",
        AttributeValue=json.dumps({"type": ["erasure/ERASE"]}),
    )
    with pytest.raises(ErasureConfigError, match="filter policy"):
        ensure_erasure_channel(sqs, sns, settings)


def test_the_worker_refuses_a_queue_whose_visibility_is_not_six_times_its_handler_timeout(
    sqs: Any, sns: Any, cloudwatch: Any, targets: ErasureTargets
) -> None:
    settings = erasure_settings(handler_timeout_seconds=2.0)
    channel = ensure_erasure_channel(sqs, sns, settings)
    other = settings.model_copy(update={"handler_timeout_seconds": 1.0, "batch_timeout_seconds": 1.0})
    worker = ErasureWorker(
        settings=other,
        sqs=sqs,
        cloudwatch=cloudwatch,
        queue_url=channel.queue_url,
        responses_queue_url=channel.responses_queue_url,
        targets=targets,
        clock=SystemClock(),
    )
    with pytest.raises(ErasureConfigError, match="visibility"):
        worker.verify_queue()
    worker.close()


def test_the_worker_refuses_a_queue_without_the_configured_redrive(
    sqs: Any, cloudwatch: Any, targets: ErasureTargets
) -> None:
    settings = erasure_settings(handler_timeout_seconds=1.0, batch_timeout_seconds=1.0)
    url = sqs.create_queue(QueueName=f"bare-{uuid.uuid4().hex[:8]}", Attributes={"VisibilityTimeout": "6"})[
        "QueueUrl"
    ]
    worker = ErasureWorker(
        settings=settings,
        sqs=sqs,
        cloudwatch=cloudwatch,
        queue_url=url,
        responses_queue_url=url,
        targets=targets,
        clock=SystemClock(),
    )
    with pytest.raises(ErasureConfigError, match="dead-letter"):
        worker.verify_queue()
    worker.close()

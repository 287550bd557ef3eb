"""`entitlements erasure setup`: the store's side of the channel, from the channel constants.

- the dead-letter queue `<queue_name>-dlq`, retention 86,400 s (queueRetentionSeconds);
- the store's queue `<queue_name>`: retention 86,400 s, visibility timeout exactly 6 x the handler
  timeout, a redrive policy to the dead-letter queue after `max_receive_count` receives, and a queue
  policy letting the topic send to it;
- the erasure topic `<topic_name>` (CreateTopic is idempotent: on AWS, where the account service owns the
  topic, it returns the existing one) and the queue's subscription to it with RawMessageDelivery and
  **no** filter policy (an existing subscription with one is refused, never silently kept);
- the responses queue `<responses_queue_name>`, retention 86,400 s (locally; on AWS it is the account
  service's and already exists).

Everything is idempotent: run it any number of times against moto or AWS.
"""

from __future__ import annotations

__all__ = ["ErasureChannel", "dead_letter_queue_name", "ensure_erasure_channel"]

import json
from dataclasses import dataclass

from config import ErasureSettings
from processors.erasure._clients import SnsSetupClient, SqsSetupClient
from processors.erasure._config import checked_timings
from processors.erasure._errors import ErasureConfigError, converted
from schema.erasure import CHANNEL_CONSTANTS

DEAD_LETTER_SUFFIX = "-dlq"


@dataclass(frozen=True, slots=True)
class ErasureChannel:
    topic_arn: str
    subscription_arn: str
    queue_url: str
    queue_arn: str
    dlq_url: str
    dlq_arn: str
    responses_queue_url: str


def dead_letter_queue_name(settings: ErasureSettings) -> str:
    return f"{settings.queue_name}{DEAD_LETTER_SUFFIX}"


def _queue(sqs: SqsSetupClient, name: str, attributes: dict[str, str]) -> tuple[str, str]:
    with converted("setup-queue"):
        url = str(sqs.create_queue(QueueName=name)["QueueUrl"])
        # create_queue refuses differing attributes on an existing queue; setting them is idempotent.
        sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, str(arn)


def _topic_may_send(queue_arn: str, topic_arn: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "erasure-topic",
                    "Effect": "Allow",
                    "Principal": {"Service": "sns.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                    "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
                }
            ],
        }
    )


def ensure_erasure_channel(
    sqs: SqsSetupClient, sns: SnsSetupClient, settings: ErasureSettings
) -> ErasureChannel:
    """Create or bring to the contract every part of the channel (see the module doc)."""
    timings = checked_timings(settings)
    retention = str(CHANNEL_CONSTANTS.queue_retention_seconds)
    dlq_url, dlq_arn = _queue(sqs, dead_letter_queue_name(settings), {"MessageRetentionPeriod": retention})
    with converted("setup-topic"):
        topic_arn = str(sns.create_topic(Name=settings.topic_name)["TopicArn"])
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(timings.max_receive_count)})
    queue_url, queue_arn = _queue(
        sqs,
        settings.queue_name,
        {
            "MessageRetentionPeriod": retention,
            "VisibilityTimeout": str(timings.visibility_timeout_seconds),
            "RedrivePolicy": redrive,
        },
    )
    with converted("setup-queue"):
        sqs.set_queue_attributes(
            QueueUrl=queue_url, Attributes={"Policy": _topic_may_send(queue_arn, topic_arn)}
        )
    with converted("setup-subscription"):
        subscription_arn = str(
            sns.subscribe(
                TopicArn=topic_arn,
                Protocol="sqs",
                Endpoint=queue_arn,
                Attributes={"RawMessageDelivery": "true"},
                ReturnSubscriptionArn=True,
            )["SubscriptionArn"]
        )
        attributes = sns.get_subscription_attributes(SubscriptionArn=subscription_arn)["Attributes"]
        if attributes.get("RawMessageDelivery") != "true":
            sns.set_subscription_attributes(
                SubscriptionArn=subscription_arn, AttributeName="RawMessageDelivery", AttributeValue="true"
            )
    if attributes.get("FilterPolicy"):
        raise ErasureConfigError(
            "the queue's subscription to the erasure topic has a filter policy: remove it (every store "
            "must receive every message)"
        )
    responses_url, _ = _queue(sqs, settings.responses_queue_name, {"MessageRetentionPeriod": retention})
    return ErasureChannel(
        topic_arn=topic_arn,
        subscription_arn=subscription_arn,
        queue_url=queue_url,
        queue_arn=queue_arn,
        dlq_url=dlq_url,
        dlq_arn=dlq_arn,
        responses_queue_url=responses_url,
    )

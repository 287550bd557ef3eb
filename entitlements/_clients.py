"""boto3 clients built from the settings: one place that knows endpoints, region and credentials."""

from __future__ import annotations

__all__ = ["aws_client"]

from typing import Any

import boto3
from botocore.config import Config

from config import AwsSettings

_SERVICE_ENDPOINT = {
    "dynamodb": "dynamodb",
    "dynamodbstreams": "streams",
    "cloudwatch": "cloudwatch",
    "sqs": "sqs",
    "sns": "sns",
    "s3": "s3",
}


def aws_client(aws: AwsSettings, service: str, **config: Any) -> Any:
    """A boto3 client for `service`; `config` (botocore `Config` arguments: timeouts, `retries`) wins
    over the defaults (standard retry mode, `aws.max_attempts` attempts)."""
    credentials: dict[str, str] = {}
    if aws.access_key_id is not None and aws.secret_access_key is not None:
        credentials = {
            "aws_access_key_id": aws.access_key_id.get_secret_value(),
            "aws_secret_access_key": aws.secret_access_key.get_secret_value(),
        }
    return boto3.client(
        service,
        region_name=aws.region,
        endpoint_url=aws.endpoint(_SERVICE_ENDPOINT.get(service, service)),
        config=Config(**{"retries": {"mode": "standard", "max_attempts": aws.max_attempts}, **config}),
        **credentials,
    )

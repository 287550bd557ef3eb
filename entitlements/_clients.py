"""boto3 clients built from the settings: one place that knows endpoints, region and credentials."""

from __future__ import annotations

__all__ = ["SETUP_BOUNDS", "aws_client", "bounded_calls"]

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import boto3
from botocore.config import Config

from config import AwsSettings

# Set-up and inspection commands: an endpoint that accepts and never answers is one line within 15 s
# (two attempts of 2 s connect + 3 s read, and the backoff between), not botocore's 60 s x attempts.
SETUP_BOUNDS: dict[str, Any] = {
    "connect_timeout": 2,
    "read_timeout": 3,
    "retries": {"mode": "standard", "total_max_attempts": 2},
}
# The caps `bounded_calls` puts on the clients built inside it (never around a long poll).
_BOUNDS: ContextVar[dict[str, Any] | None] = ContextVar("aws_call_bounds", default=None)


@contextmanager
def bounded_calls(bounds: dict[str, Any] | None = None) -> Iterator[None]:
    """Every client `aws_client` builds inside is capped by `bounds` (default `SETUP_BOUNDS`): the
    shorter of its own timeout and the bound's, the bound's retries. A command bounds the clients its
    parts build, whoever builds them; a long-poll client (SQS WaitTimeSeconds) is never built inside,
    as its read timeout must outlast its wait."""
    token = _BOUNDS.set(SETUP_BOUNDS if bounds is None else bounds)
    try:
        yield
    finally:
        _BOUNDS.reset(token)


_SERVICE_ENDPOINT = {
    "dynamodb": "dynamodb",
    "dynamodbstreams": "streams",
    "cloudwatch": "cloudwatch",
    "sqs": "sqs",
    "sns": "sns",
    "s3": "s3",
}


def _bounded(config: dict[str, Any]) -> dict[str, Any]:
    """`config` under the enclosing `bounded_calls`' caps: the shorter of each timeout, its retries."""
    bounds = _BOUNDS.get()
    if not bounds:
        return config
    capped = dict(config)
    for key, bound in bounds.items():
        if key.endswith("_timeout") and key in capped:
            capped[key] = min(capped[key], bound)
        else:
            capped[key] = bound
    return capped


def aws_client(aws: AwsSettings, service: str, **config: Any) -> Any:
    """A boto3 client for `service`; `config` (botocore `Config` arguments: timeouts, `retries`) wins
    over the defaults (standard retry mode, `aws.max_attempts` attempts); an enclosing `bounded_calls`
    caps both."""
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
        config=Config(
            **_bounded({"retries": {"mode": "standard", "max_attempts": aws.max_attempts}, **config})
        ),
        **credentials,
    )

"""entitlements/_clients.py: boto3 clients built from the settings."""

from __future__ import annotations

from config import AwsSettings
from entitlements._clients import aws_client

AWS = AwsSettings(endpoint_url="http://127.0.0.1:1", access_key_id="testing", secret_access_key="testing")


def test_a_client_retries_in_standard_mode_by_default() -> None:
    # botocore counts the first call too: max_attempts 5 (retries) is total_max_attempts 6.
    assert aws_client(AWS, "sqs").meta.config.retries == {"mode": "standard", "total_max_attempts": 6}


def test_retries_given_by_the_caller_win_over_the_default() -> None:
    client = aws_client(AWS, "sqs", retries={"mode": "standard", "total_max_attempts": 2})
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 2}


def test_timeouts_given_by_the_caller_reach_the_client() -> None:
    config = aws_client(AWS, "dynamodb", connect_timeout=1.5, read_timeout=2.5).meta.config
    assert (config.connect_timeout, config.read_timeout) == (1.5, 2.5)


def test_the_endpoint_is_the_settings_one() -> None:
    assert aws_client(AWS, "dynamodb").meta.endpoint_url == "http://127.0.0.1:1"


def test_a_client_built_inside_bounded_calls_takes_the_shorter_timeouts_and_the_bounded_retries() -> None:
    from entitlements._clients import SETUP_BOUNDS, bounded_calls  # noqa: PLC0415

    with bounded_calls():
        config = aws_client(AWS, "sqs", connect_timeout=1, read_timeout=30).meta.config
    assert (config.connect_timeout, config.read_timeout, config.retries) == (
        1,
        SETUP_BOUNDS["read_timeout"],
        SETUP_BOUNDS["retries"],
    )


def test_a_client_built_after_bounded_calls_keeps_its_own_read_timeout() -> None:
    from entitlements._clients import bounded_calls  # noqa: PLC0415

    with bounded_calls():
        pass
    assert aws_client(AWS, "sqs", read_timeout=30).meta.config.read_timeout == 30

"""processors/cleanup/_clients.py: the botocore bounds of a flush's DynamoDB and SQS calls."""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config

from processors.cleanup import flush_call_bounds
from processors.cleanup._errors import GuardUnavailableError
from processors.cleanup._table import find_rows_for_account


@pytest.mark.parametrize("budget", [0.5, 3.0, 20.0, 600.0])
def test_a_call_and_its_retry_take_at_most_three_quarters_of_the_flush_budget(budget: float) -> None:
    bounds = flush_call_bounds(budget)
    attempts = bounds["retries"]["total_max_attempts"]
    assert attempts == 2
    assert (bounds["connect_timeout"] + bounds["read_timeout"]) * attempts <= budget * 0.75
    assert bounds["connect_timeout"] <= 2.0
    assert bounds["read_timeout"] <= 5.0


def test_a_budget_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        flush_call_bounds(0)


@pytest.mark.timeout(30)
def test_a_client_built_with_the_bounds_gives_up_on_a_hung_table_and_the_guard_fails_closed(
    hanging_endpoint: str,
) -> None:
    client = boto3.client(
        "dynamodb",
        endpoint_url=hanging_endpoint,
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(**flush_call_bounds(1.0)),
    )
    with pytest.raises(GuardUnavailableError) as raised:
        find_rows_for_account(client, "entitlements", "acct-1")
    assert raised.value.code == "ReadTimeoutError"

"""The local stack: moto, the TTL emulator and the table, together."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from devstack.ports import PortInUseError
from devstack.stack import LocalStack, StackEndpoints
from devstack.streams import read_kinesis_stream
from schema.clock import SystemClock
from tests.support.dynamodb import FixedClock, client, get_item, read_stream, unique_table_name


@pytest.fixture
def stack() -> Iterator[tuple[LocalStack, StackEndpoints]]:
    name = unique_table_name("stack")
    local = LocalStack(
        clock=FixedClock(datetime(2030, 6, 1, tzinfo=UTC)),
        region="eu-west-1",
        table_name=name,
        ttl_interval_seconds=0.05,
        ttl_table_names=[name],  # moto's state is shared by the whole test process
    )
    with local as endpoints:
        yield local, endpoints


def wait_for(condition: object, timeout: float = 20.0) -> bool:
    """Poll until `condition()` holds; the outcome, never the time it took, is what tests assert."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_the_stack_makes_the_table_and_reports_its_stream(stack: tuple[LocalStack, StackEndpoints]) -> None:
    _, endpoints = stack
    described = client(endpoints.endpoint_url, "dynamodb").describe_table(TableName=endpoints.table_name)
    assert described["Table"]["LatestStreamArn"] == endpoints.stream_arn


def test_the_stack_is_on_loopback(stack: tuple[LocalStack, StackEndpoints]) -> None:
    _, endpoints = stack
    assert (endpoints.host, endpoints.endpoint_url) == ("127.0.0.1", f"http://127.0.0.1:{endpoints.port}")


def test_the_running_emulator_deletes_expired_items_as_ttl_deletions(
    stack: tuple[LocalStack, StackEndpoints],
) -> None:
    _, endpoints = stack
    assert endpoints.table_name is not None and endpoints.stream_arn is not None
    dynamodb = client(endpoints.endpoint_url, "dynamodb")
    dynamodb.put_item(
        TableName=endpoints.table_name,
        Item={"pk": {"S": "USER#s"}, "sk": {"S": "CLEANUP#CANCELLATION"}, "ttl": {"N": "1900000000"}},
    )
    assert wait_for(
        lambda: get_item(dynamodb, endpoints.table_name, "USER#s", "CLEANUP#CANCELLATION") is None
    )
    removal = read_stream(client(endpoints.endpoint_url, "dynamodbstreams"), endpoints.stream_arn)[-1]
    assert removal["userIdentity"]["Type"] == "Service"


def test_a_stack_without_a_table_makes_none() -> None:
    with LocalStack(
        clock=SystemClock(), region="eu-west-1", table_name=None, ttl_table_names=[]
    ) as endpoints:
        assert (endpoints.table_name, endpoints.stream_arn) == (None, None)


def test_stopping_the_stack_stops_its_emulator() -> None:
    local = LocalStack(
        clock=SystemClock(),
        region="eu-west-1",
        table_name=None,
        ttl_interval_seconds=0.05,
        ttl_table_names=[],
    )
    with local:
        pass
    passes = local.ttl_emulator.passes
    time.sleep(0.2)
    assert local.ttl_emulator.passes == passes


def test_a_local_stack_on_a_taken_port_fails_at_once_instead_of_waiting() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        stack = LocalStack(
            clock=SystemClock(), region="eu-west-1", table_name=None, port=holder.getsockname()[1]
        )
        with pytest.raises(PortInUseError):
            stack.start()


def test_a_stack_with_kinesis_shards_forwards_the_tables_changes_there() -> None:
    name = unique_table_name("stack")
    local = LocalStack(
        clock=SystemClock(), region="eu-west-1", table_name=name, ttl_table_names=[name], kinesis_shards=3
    )
    with local as endpoints:
        assert endpoints.kinesis_stream_arn is not None
        kinesis = client(endpoints.endpoint_url, "kinesis")
        stream = endpoints.kinesis_stream_arn.rsplit("/", 1)[1]
        assert len(kinesis.list_shards(StreamName=stream)["Shards"]) == 3
        client(endpoints.endpoint_url, "dynamodb").put_item(
            TableName=name, Item={"pk": {"S": "USER#k"}, "sk": {"S": "ENTITLEMENT#a"}}
        )

        def forwarded() -> list[str]:
            return [record["PartitionKey"] for _, record in read_kinesis_stream(kinesis, stream)]

        assert wait_for(lambda: forwarded() == ["pk=USER#k|sk=ENTITLEMENT#a"])


def test_a_stack_without_kinesis_shards_names_no_kinesis_stream(
    stack: tuple[LocalStack, StackEndpoints],
) -> None:
    assert stack[1].kinesis_stream_arn is None

"""The local stack: moto on 127.0.0.1, the TTL emulator beside it, and the entitlements table.

    with LocalStack(clock=clock, region="eu-west-1", table_name="entitlements") as endpoints:
        ...  # endpoints.endpoint_url serves DynamoDB, Streams, SQS, SNS, S3, CloudWatch

Everything runs in this process: the TTL emulator reaches moto's backend directly (see
`devstack.ttl_emulator`). Nothing listens off loopback. A port that is already taken is refused before
anything starts (`PortInUseError`, naming the port and the option that chooses another).
"""

from __future__ import annotations

__all__ = [
    "DynamoDBClientFactory",
    "LocalStack",
    "PortInUseError",
    "StackEndpoints",
    "boto3_dynamodb_client",
    "ensure_free_ports",
]

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import boto3

from devstack.kinesis_forwarder import Faults, KinesisForwarder, create_kinesis_stream
from devstack.moto_server import LOOPBACK, MotoServer
from devstack.ports import PortInUseError, ensure_free_ports
from devstack.ttl_emulator import TtlEmulator
from pipeline import create_table
from schema.clock import Clock

_log = logging.getLogger(__name__)

# (endpoint_url, region) -> a DynamoDB client for that endpoint. `Any`: boto3 clients are untyped.
DynamoDBClientFactory = Callable[[str, str], Any]

# moto accepts any credentials; these never leave the machine.
_LOCAL_ACCESS_KEY = "testing"
_LOCAL_SECRET_KEY = "testing"  # noqa: S105  (moto's dummy credentials, not a secret)


def boto3_dynamodb_client(endpoint_url: str, region: str) -> Any:
    """A boto3 DynamoDB client for the local stack (dummy credentials, no metadata lookups)."""
    return _local_client("dynamodb", endpoint_url, region)


def _local_client(service: str, endpoint_url: str, region: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint_url,
        region_name=region,
        aws_access_key_id=_LOCAL_ACCESS_KEY,
        aws_secret_access_key=_LOCAL_SECRET_KEY,
    )


@dataclass(frozen=True, slots=True)
class StackEndpoints:
    endpoint_url: str  # every service: DynamoDB, DynamoDB Streams, SQS, SNS, S3, CloudWatch
    host: str
    port: int
    region: str
    table_name: str | None
    table_arn: str | None
    stream_arn: str | None
    # The Kinesis stream the table's changes are forwarded to (`kinesis_shards`), when there is one.
    kinesis_stream_arn: str | None = None


class LocalStack:
    """moto + the TTL emulator (+ the entitlements table unless `table_name` is None).

    moto's state is process-wide: every moto server in this process shares it, and the emulator scans
    every table unless `ttl_table_names` names the ones it may touch (tests that share a process do).
    """

    def __init__(
        self,
        *,
        clock: Clock,
        region: str,
        table_name: str | None,
        port: int = 0,
        ttl_interval_seconds: float = 1.0,
        client_factory: DynamoDBClientFactory = boto3_dynamodb_client,
        ttl_table_names: Collection[str] | None = None,
        kinesis_shards: int = 0,
        kinesis_faults: Faults | None = None,
    ) -> None:
        self._server = MotoServer(port)
        # With shards, the table's changes also go to a Kinesis stream of that many shards, as Kinesis
        # Data Streams for DynamoDB would put them (devstack.kinesis_forwarder).
        self._kinesis_shards = kinesis_shards
        self._kinesis_faults = kinesis_faults or Faults()
        self._forwarder: KinesisForwarder | None = None
        self._port = port
        self._emulator = TtlEmulator(
            clock,
            interval_seconds=ttl_interval_seconds,
            lock=self._server.dynamodb_lock,
            table_names=ttl_table_names,
        )
        self._region = region
        self._table_name = table_name
        self._client_factory = client_factory
        self._endpoints: StackEndpoints | None = None

    @property
    def ttl_emulator(self) -> TtlEmulator:
        return self._emulator

    @property
    def endpoints(self) -> StackEndpoints:
        if self._endpoints is None:
            raise RuntimeError("local stack not started")
        return self._endpoints

    def start(self) -> StackEndpoints:
        if self._endpoints is not None:
            return self._endpoints
        ensure_free_ports({"--port": self._port})  # moto's server would wait forever on a taken port
        endpoint = self._server.start()
        try:
            table_arn = stream_arn = kinesis_arn = None
            if self._table_name is not None:
                table = create_table(self._client_factory(endpoint, self._region), self._table_name)
                table_arn, stream_arn = table.table_arn, table.stream_arn
                if self._kinesis_shards:
                    kinesis_arn = self._forward_to_kinesis(endpoint, self._table_name, table.stream_arn)
            self._emulator.start()
        except BaseException:
            self._server.stop()
            raise
        self._endpoints = StackEndpoints(
            endpoint_url=endpoint,
            host=LOOPBACK,
            port=self._server.port,
            region=self._region,
            table_name=self._table_name,
            table_arn=table_arn,
            stream_arn=stream_arn,
            kinesis_stream_arn=kinesis_arn,
        )
        _log.info("local stack up", extra={"port": self._server.port})
        return self._endpoints

    def _forward_to_kinesis(self, endpoint: str, table_name: str, stream_arn: str) -> str:
        kinesis = _local_client("kinesis", endpoint, self._region)
        name = f"{table_name}-changes"
        arn = create_kinesis_stream(kinesis, name, self._kinesis_shards)
        self._forwarder = KinesisForwarder(
            streams=_local_client("dynamodbstreams", endpoint, self._region),
            kinesis=kinesis,
            stream_arn=stream_arn,
            kinesis_stream_name=name,
            table_name=table_name,
            faults=self._kinesis_faults,
        )
        self._forwarder.start()
        return arn

    def stop(self) -> None:
        if self._forwarder is not None:
            self._forwarder.stop()
            self._forwarder = None
        self._emulator.stop()
        self._server.stop()
        self._endpoints = None

    def __enter__(self) -> StackEndpoints:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

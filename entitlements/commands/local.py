"""`entitlements local up`: moto on 127.0.0.1 with the entitlements table and the TTL emulator, the fakes the
service calls (Array, transactions-service; `devstack.fake_array`, `devstack.fake_transactions`, on
127.0.0.1 too), the entitlements service itself against them (unless `--no-service`; on 127.0.0.1,
`--service-port`, default service.port), and (unless `--no-setup`) what the setup commands make: the
cleanup's retry queues and the erasure channel.

Prints the endpoints and the environment to export so that every other command (simulate, consume, the
processors) talks to this stack and shares its clock; runs until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

__all__ = ["app", "lake_root", "stack_environment"]

import contextlib
import os
import shlex
import signal
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import SecretStr

from entitlements._logging import configure_logging

if TYPE_CHECKING:  # the stack's modules (moto, the fakes) are imported when `up` runs: --help stays fast
    from config import ClockSettings, Settings
    from devstack.fake_array import FakeArrayServer
    from devstack.fake_transactions import FakeTransactionsServer
    from devstack.stack import LocalStack, StackEndpoints

app = typer.Typer(no_args_is_help=True, help="The local stack (moto on 127.0.0.1).")


class _StopRequested(BaseException):
    """SIGTERM or Ctrl-C while the stack is starting. A BaseException, as KeyboardInterrupt is: code that
    catches Exception on the way (a logging handler writing a line) must not swallow it."""


# moto accepts any credentials; these dummies keep every SDK (boto3, the Java KCL) off real accounts.
_LOCAL_CREDENTIAL = "testing"


def _clock_settings(settings: Settings, speed: float | None, start: datetime | None) -> ClockSettings:
    """The shared clock: the settings' own when they set one, else a new simulation starting now."""
    from config import ClockSettings  # noqa: PLC0415 (kept off --help)

    if speed is None and start is None:
        return settings.clock
    now = datetime.now(UTC)
    begin = start if start is not None else now
    if begin.tzinfo is None:
        begin = begin.replace(tzinfo=UTC)
    return ClockSettings(start=begin, anchor=now, speed=speed if speed is not None else 1.0)


def stack_environment(
    endpoints: StackEndpoints,
    clock: ClockSettings,
    *,
    array_url: str | None = None,
    transactions_url: str | None = None,
) -> dict[str, str]:
    """The variables that point the project's settings (and the AWS SDKs) at the local stack and its
    fakes."""
    env = {
        "ENTITLEMENTS_AWS__ENDPOINT_URL": endpoints.endpoint_url,
        "ENTITLEMENTS_AWS__REGION": endpoints.region,
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": _LOCAL_CREDENTIAL,
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": _LOCAL_CREDENTIAL,
    }
    if endpoints.table_name is not None:
        env["ENTITLEMENTS_CONSUMER__TABLE_NAME"] = endpoints.table_name
    if endpoints.stream_arn is not None:
        env["ENTITLEMENTS_CONSUMER__STREAM_ARN"] = endpoints.stream_arn
    if array_url is not None:
        env["ENTITLEMENTS_ARRAY__BASE_URL"] = array_url
    if transactions_url is not None:
        env["ENTITLEMENTS_SERVICE__TRANSACTIONS_BASE_URL"] = transactions_url
    if clock.start is not None:
        env["ENTITLEMENTS_CLOCK__START"] = clock.start.isoformat()
        env["ENTITLEMENTS_CLOCK__ANCHOR"] = (clock.anchor or clock.start).isoformat()
        env["ENTITLEMENTS_CLOCK__SPEED"] = repr(clock.speed)
    env.update(
        {
            "AWS_ACCESS_KEY_ID": _LOCAL_CREDENTIAL,
            "AWS_SECRET_ACCESS_KEY": _LOCAL_CREDENTIAL,
            "AWS_DEFAULT_REGION": endpoints.region,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    return env


def _local_settings(
    settings: Settings,
    endpoints: StackEndpoints,
    clock: ClockSettings | None = None,
    *,
    array_url: str | None = None,
    transactions_url: str | None = None,
) -> Settings:
    """The settings with AWS pointed at the stack (and, when given, Array and transactions-service at
    the fakes, the clock at the stack's)."""
    from config import AwsSettings  # noqa: PLC0415 (kept off --help)

    update: dict[str, object] = {
        "aws": AwsSettings(
            endpoint_url=endpoints.endpoint_url,
            region=endpoints.region,
            access_key_id=SecretStr(_LOCAL_CREDENTIAL),
            secret_access_key=SecretStr(_LOCAL_CREDENTIAL),
        )
    }
    if array_url is not None:
        update["array"] = settings.array.model_copy(update={"base_url": array_url})
    if transactions_url is not None:
        update["service"] = settings.service.model_copy(update={"transactions_base_url": transactions_url})
    if clock is not None:
        update["clock"] = clock
    if endpoints.table_name is not None:
        update["consumer"] = settings.consumer.model_copy(update={"table_name": endpoints.table_name})
    return settings.model_copy(update=update)


def _set_up(settings: Settings, endpoints: StackEndpoints) -> None:
    """What `entitlements cleanup setup` and `entitlements erasure setup` make, on the local stack."""
    from entitlements import compose  # noqa: PLC0415

    local = _local_settings(settings, endpoints)
    queues = compose.setup_retry_queues(local)
    channel = compose.setup_erasure_channel(local, local.erasure)
    typer.echo(f"cleanup retry queue: {queues.queue_url}")
    typer.echo(f"erasure queue: {channel.queue_url}")


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


def _parts(
    settings: Settings,
    clock: ClockSettings,
    ports: dict[str, int],
    *,
    table_name: str | None,
    ttl: float,
    kinesis: tuple[int, float, float] = (0, 0.0, 0.0),
) -> tuple[LocalStack, FakeArrayServer, FakeTransactionsServer]:
    """moto with the TTL emulator, the fake Array and the fake transactions-service, not started.
    `kinesis`: the shards of the Kinesis stream the table's changes go to (0: none), and the rates of
    the duplicates and reorderings injected there."""
    from devstack.fake_array import FakeArrayServer  # noqa: PLC0415
    from devstack.fake_transactions import FakeTransactionsServer  # noqa: PLC0415
    from devstack.kinesis_forwarder import Faults  # noqa: PLC0415
    from devstack.stack import LocalStack  # noqa: PLC0415
    from schema.clock import clock_from_settings  # noqa: PLC0415

    shards, duplicates, reorders = kinesis
    stack = LocalStack(
        clock=clock_from_settings(clock),
        region=settings.aws.region,
        table_name=table_name,
        port=ports["--port"],
        ttl_interval_seconds=ttl,
        kinesis_shards=shards,
        kinesis_faults=Faults(duplicate_rate=duplicates, reorder_rate=reorders),
    )
    # Every account exists at the fake Array until its first delete, so that cleanups of rows written
    # straight to the table (the simulator's planted anomalies) find their accounts, as in production.
    array = FakeArrayServer(
        port=ports["--array-port"],
        app_key=settings.array.app_key.get_secret_value(),
        server_token=settings.array.server_token.get_secret_value(),
        every_account_exists=True,
    )
    return stack, array, FakeTransactionsServer(port=ports["--transactions-port"])


def lake_root(root: str) -> str:
    """The lake root as every shell should see it: an s3:// root as given, a folder made absolute."""
    return root if "://" in root else str(Path(root).resolve())


def _where_it_keeps(settings: Settings) -> dict[str, str]:
    """The lake and the state folder, exported absolute: a command run from another folder uses these,
    not a var/ of its own."""
    return {
        "ENTITLEMENTS_LAKE__ROOT": lake_root(settings.lake.root),
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(settings.consumer.state_dir.resolve()),
    }


def _exports(environment: dict[str, str]) -> str:
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in environment.items())


def _refuse_early(ports: dict[str, int], env_file: Path | None) -> None:
    """What would fail after the stack started, refused before anything starts: a port in use or given
    twice, an exports file whose folder cannot be made."""
    from devstack.ports import ensure_free_ports  # noqa: PLC0415

    ensure_free_ports(ports)
    if env_file is not None:
        env_file.parent.mkdir(parents=True, exist_ok=True)


def _print_endpoints(
    endpoints: StackEndpoints, clock_settings: ClockSettings, urls: tuple[str, str, str | None], lake: str
) -> None:
    array_url, transactions_url, service_url = urls
    typer.echo(f"moto (DynamoDB, Streams, SQS, SNS, S3, CloudWatch): {endpoints.endpoint_url}")
    typer.echo(f"region: {endpoints.region}")
    if endpoints.table_name is not None:
        typer.echo(f"table: {endpoints.table_name}")
        typer.echo(f"stream: {endpoints.stream_arn}")
    if endpoints.kinesis_stream_arn is not None:
        typer.echo(
            f"kinesis stream (the table's changes, Kinesis's envelope): {endpoints.kinesis_stream_arn}"
        )
    speed = f" (simulated clock x{clock_settings.speed})" if clock_settings.start else ""
    typer.echo(f"ttl emulator: running{speed}")
    typer.echo(f"fake Array: {array_url}")
    typer.echo(f"fake transactions-service: {transactions_url}")
    if service_url is not None:
        typer.echo(f"entitlements service: {service_url} (OpenAPI: {service_url}/docs)")
    typer.echo(f"lake (the service's outcomes; consume lands the stream there): {lake}")


def _service_metrics(settings: Settings) -> contextlib.AbstractContextManager[object]:
    """The service's metrics, as `serve` publishes them: its Prometheus endpoint on
    ENTITLEMENTS_METRICS__SERVICE_PORT (when set) and its EMF documents (when a sink is set)."""
    import telemetry  # noqa: PLC0415 (kept off --help)

    metrics = settings.metrics
    return telemetry.running_metrics(
        metrics, process="service", port=metrics.service_port, variable="ENTITLEMENTS_METRICS__SERVICE_PORT"
    )


def _load_settings() -> Settings:
    from config import load_settings  # noqa: PLC0415 (kept off --help)

    return load_settings()


@app.command("up")
def up(
    *,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1; 0 picks a free one.")] = 0,
    clock_speed: Annotated[
        float | None, typer.Option(min=0.000001, help="Start a simulated clock this many times real time.")
    ] = None,
    clock_start: Annotated[
        datetime | None, typer.Option(help="Simulated start (UTC when naive); default now.")
    ] = None,
    ttl_interval: Annotated[
        float, typer.Option(min=0.01, help="Real seconds between TTL emulator passes.")
    ] = 1.0,
    table: Annotated[bool, typer.Option("--table/--no-table", help="Create the entitlements table.")] = True,
    array_port: Annotated[
        int, typer.Option(min=0, max=65535, help="The fake Array's port on 127.0.0.1; 0 picks a free one.")
    ] = 0,
    transactions_port: Annotated[
        int,
        typer.Option(
            min=0, max=65535, help="The fake transactions-service's port on 127.0.0.1; 0 picks a free one."
        ),
    ] = 0,
    setup: Annotated[
        bool,
        typer.Option(
            "--setup/--no-setup",
            help="Also run `cleanup setup` and `erasure setup` against the stack (the consumer needs them).",
        ),
    ] = True,
    service: Annotated[
        bool,
        typer.Option(
            "--service/--no-service",
            help="Also serve the entitlements service (needs the table) against the stack and the fakes.",
        ),
    ] = True,
    service_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="The service's port on 127.0.0.1 (default service.port; 0 free)."
        ),
    ] = None,
    env_file: Annotated[
        Path | None, typer.Option(help="Also write the exports to this file (mode 0600).")
    ] = None,
    kinesis_shards: Annotated[
        int,
        typer.Option(
            min=0,
            max=64,
            help="Also forward the table's changes to a Kinesis stream of this many shards, as Kinesis "
            "Data Streams for DynamoDB would (0: none).",
        ),
    ] = 0,
    kinesis_duplicates: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="With --kinesis-shards: the rate of duplicated changes.")
    ] = 0.0,
    kinesis_reorders: Annotated[
        float,
        typer.Option(
            min=0.0, max=1.0, help="With --kinesis-shards: the rate of an item's changes put out of order."
        ),
    ] = 0.0,
) -> None:
    """Run moto + the TTL emulator (+ the table), the fake Array and transactions-service (+ the
    entitlements service) on 127.0.0.1 until Ctrl-C or SIGTERM. A port already in use is refused before
    anything starts; a stop asked for while starting stops what has started."""
    configure_logging()
    settings = _load_settings()
    port_wanted = settings.service.port if service_port is None else service_port
    ports = {"--port": port, "--array-port": array_port, "--transactions-port": transactions_port}
    serving = service and table
    metrics_port = (settings.metrics.service_port or 0) if serving else 0
    _refuse_early(
        ports
        | {
            "--service-port": port_wanted if serving else 0,
            "ENTITLEMENTS_METRICS__SERVICE_PORT": metrics_port,
        },
        env_file,
    )
    clock_settings = _clock_settings(settings, clock_speed, clock_start)
    stack, array, transactions = _parts(
        settings,
        clock_settings,
        ports,
        table_name=settings.consumer.table_name if table else None,
        ttl=ttl_interval,
        kinesis=(kinesis_shards, kinesis_duplicates, kinesis_reorders),
    )
    stop = threading.Event()
    started = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()
        if not started.is_set():  # still starting: unwind now (the finally below stops what started)
            raise _StopRequested

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    running = contextlib.ExitStack()
    try:
        endpoints = stack.start()
        array.start()
        transactions.start()
        if setup:
            _set_up(settings, endpoints)
        service_url = None
        if service and endpoints.table_name is not None:
            from entitlements._workload import local_service  # noqa: PLC0415 (the service's stack)

            local = _local_settings(
                settings, endpoints, clock_settings, array_url=array.url, transactions_url=transactions.url
            )
            service_url = running.enter_context(local_service(local, port=port_wanted)).url
            running.enter_context(_service_metrics(settings))
        exports = _exports(
            stack_environment(
                endpoints, clock_settings, array_url=array.url, transactions_url=transactions.url
            )
            | (kept := _where_it_keeps(settings))
        )
        if env_file is not None:
            _write_private(env_file, exports)
        _print_endpoints(
            endpoints,
            clock_settings,
            (array.url, transactions.url, service_url),
            kept["ENTITLEMENTS_LAKE__ROOT"],
        )
        typer.echo("# export these in other shells:")
        typer.echo(exports, nl=False)
        typer.echo("# Ctrl-C to stop", err=True)
        started.set()
        stop.wait()
    except _StopRequested:
        typer.echo("entitlements: local up: stopped while starting", err=True)
        raise typer.Exit(143) from None
    finally:
        started.set()  # a second signal while stopping waits for the stop
        running.close()
        transactions.stop()
        array.stop()
        stack.stop()

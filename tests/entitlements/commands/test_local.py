"""`entitlements local up`: moto + the TTL emulator + the table on 127.0.0.1, until stopped."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil
import pytest

from config import ClockSettings, load_settings
from devstack.stack import StackEndpoints
from entitlements.commands.local import lake_root, stack_environment
from schema.array import primary_account_path
from tests.support.dynamodb import client

ENDPOINTS = StackEndpoints(
    endpoint_url="http://127.0.0.1:45678",
    host="127.0.0.1",
    port=45678,
    region="eu-west-1",
    table_name="entitlements-local",
    table_arn="arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements-local",
    stream_arn="arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements-local/stream/2030-01-01T00:00:00",
)
SIMULATED = ClockSettings(
    start=datetime(2030, 1, 1, tzinfo=UTC), anchor=datetime(2026, 1, 1, tzinfo=UTC), speed=86400.0
)


def test_the_exports_point_the_settings_at_the_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in stack_environment(ENDPOINTS, SIMULATED).items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert (
        settings.aws.endpoint("dynamodb"),
        settings.aws.endpoint("streams"),
        settings.aws.region,
        settings.consumer.table_name,
        settings.consumer.stream_arn,
    ) == (
        ENDPOINTS.endpoint_url,
        ENDPOINTS.endpoint_url,
        "eu-west-1",
        "entitlements-local",
        ENDPOINTS.stream_arn,
    )


def test_the_exports_share_the_simulated_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in stack_environment(ENDPOINTS, SIMULATED).items():
        monkeypatch.setenv(name, value)
    assert load_settings().clock == SIMULATED


def test_a_real_clock_exports_no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not any(
        name.startswith("ENTITLEMENTS_CLOCK__") for name in stack_environment(ENDPOINTS, ClockSettings())
    )


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    exports: dict[str, str]
    stdout: Path
    environment: dict[str, str]


def start_local_up(tmp: Path, **settings: str) -> Running:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENTITLEMENTS_")} | settings
    env["ENTITLEMENTS_LAKE__ROOT"] = str(tmp / "lake")
    env["ENTITLEMENTS_CONSUMER__STATE_DIR"] = str(tmp / "state")
    env_file, stdout = tmp / "local.env", tmp / "stdout.txt"
    with stdout.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-c", "from entitlements.cli import main; main()",
                "local", "up", "--clock-speed", "1000", "--env-file", str(env_file), "--service-port", "0",
            ],
            env=env, stdout=out, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    deadline = time.monotonic() + 120
    while not env_file.exists() or not env_file.read_text().endswith("\n"):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError("local up did not come up")
        time.sleep(0.1)
    exports = dict(line.removeprefix("export ").split("=", 1) for line in env_file.read_text().splitlines())
    return Running(process, {k: shlex.split(v)[0] for k, v in exports.items()}, stdout, env)


def stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    up = start_local_up(
        tmp_path_factory.mktemp("local-up"), ENTITLEMENTS_METRICS__SERVICE_PORT=str(free_port())
    )
    yield up
    if up.process.poll() is None:
        stop(up.process)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_local_up_makes_the_table_it_exports(running: Running) -> None:
    dynamodb = client(running.exports["ENTITLEMENTS_AWS__ENDPOINT_URL"], "dynamodb")
    table = dynamodb.describe_table(TableName=running.exports["ENTITLEMENTS_CONSUMER__TABLE_NAME"])["Table"]
    assert table["LatestStreamArn"] == running.exports["ENTITLEMENTS_CONSUMER__STREAM_ARN"]


def test_local_up_listens_on_loopback_only(running: Running) -> None:
    listening = {
        c.laddr.ip
        for c in psutil.Process(running.process.pid).net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN
    }
    assert listening == {"127.0.0.1"}


def test_local_up_prints_the_endpoint_and_the_exports(running: Running) -> None:
    printed = running.stdout.read_text()
    endpoint = running.exports["ENTITLEMENTS_AWS__ENDPOINT_URL"]
    assert (f"moto (DynamoDB, Streams, SQS, SNS, S3, CloudWatch): {endpoint}" in printed) and (
        f"export ENTITLEMENTS_AWS__ENDPOINT_URL={endpoint}" in printed
    )


def test_local_up_exports_the_simulated_clock_it_started(running: Running) -> None:
    assert running.exports["ENTITLEMENTS_CLOCK__SPEED"] == "1000.0"


def test_local_up_env_file_is_private(running: Running, tmp_path_factory: pytest.TempPathFactory) -> None:
    env_files = list(Path(tmp_path_factory.getbasetemp()).glob("local-up*/local.env"))
    assert env_files and all(f.stat().st_mode & 0o077 == 0 for f in env_files)


def test_local_up_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    assert stop(start_local_up(tmp_path).process) == 0


def test_local_up_stopped_while_starting_stops_what_started_and_says_so_on_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENTITLEMENTS_")}
    env["ENTITLEMENTS_CONSUMER__STATE_DIR"] = str(tmp_path / "state")
    process = subprocess.Popen(
        [sys.executable, "-c", "from entitlements.cli import main; main()", "local", "up",
         "--service-port", "0"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:  # moto is up; the fakes, the queues and the service are still to come
        if '"local stack up"' in line:
            process.send_signal(signal.SIGTERM)
            break
    try:
        rest = process.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert (process.returncode, rest) == (143, "entitlements: local up: stopped while starting\n")


def test_local_up_makes_the_queues_the_setup_commands_make(running: Running) -> None:
    sqs = client(running.exports["ENTITLEMENTS_AWS__ENDPOINT_URL"], "sqs")
    names = {url.rsplit("/", 1)[-1] for url in sqs.list_queues().get("QueueUrls", [])}
    assert {"entitlements-cleanup-retry", "entitlements-erasure", "erasure-responses"} <= names


def test_local_up_runs_the_fake_array_it_exports_and_prints(running: Running) -> None:
    url = running.exports["ENTITLEMENTS_ARRAY__BASE_URL"]
    assert f"fake Array: {url}" in running.stdout.read_text()
    assert httpx.get(f"{url}/__admin/stats", timeout=5).status_code == 200


def test_local_up_runs_the_fake_transactions_service_it_exports_and_prints(running: Running) -> None:
    url = running.exports["ENTITLEMENTS_SERVICE__TRANSACTIONS_BASE_URL"]
    assert f"fake transactions-service: {url}" in running.stdout.read_text()
    assert httpx.get(url + primary_account_path("u1"), timeout=5).status_code == 200


def test_the_exports_point_the_array_and_transactions_settings_at_the_fakes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = stack_environment(
        ENDPOINTS, SIMULATED, array_url="http://127.0.0.1:1", transactions_url="http://127.0.0.1:2"
    )
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert (settings.array.base_url, settings.service.transactions_base_url) == (
        "http://127.0.0.1:1",
        "http://127.0.0.1:2",
    )


def test_local_up_serves_the_entitlements_service_it_prints(running: Running) -> None:
    printed = running.stdout.read_text()
    line = next(line for line in printed.splitlines() if line.startswith("entitlements service: "))
    url = line.removeprefix("entitlements service: ").split(" ", 1)[0]
    assert httpx.get(f"{url}/stats", timeout=5).status_code == 200


def test_local_up_serves_the_services_metrics_on_the_service_metrics_port(running: Running) -> None:
    port = running.environment["ENTITLEMENTS_METRICS__SERVICE_PORT"]
    scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert scraped.status_code == 200 and "# TYPE entitlements_service_requests" in scraped.text


def test_local_up_exports_the_lake_and_the_state_folder_it_uses(running: Running) -> None:
    assert running.exports["ENTITLEMENTS_LAKE__ROOT"] == running.environment["ENTITLEMENTS_LAKE__ROOT"]
    state = running.environment["ENTITLEMENTS_CONSUMER__STATE_DIR"]
    assert running.exports["ENTITLEMENTS_CONSUMER__STATE_DIR"] == state
    lake = running.exports["ENTITLEMENTS_LAKE__ROOT"]
    assert f"lake (the service's outcomes; consume lands the stream there): {lake}" in (
        running.stdout.read_text().splitlines()
    )


def test_a_relative_lake_root_is_exported_absolute_and_an_s3_root_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert (lake_root("var/lake"), lake_root("s3://bucket/lake")) == (
        str(tmp_path / "var" / "lake"),
        "s3://bucket/lake",
    )

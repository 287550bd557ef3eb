"""The compose file's services work together as the images run them: the images' install script
(scripts/install.py) into a fresh virtual environment, then every service's command from it, in
dependency order (the setup services first), with compose's environment, on loopback
(tests/docker/compose_services.py says what stands in for each part of a container). The consumer lands
a record written to the table in the lake; the erasure worker answers a CHECK on the channel that
`erasure setup` made."""

from __future__ import annotations

import sys
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from config import Settings, load_settings
from devstack._writes import entitlement_row, unconditional_put
from schema.erasure import (
    CheckRequest,
    HoldingsResponse,
    parse_erasure_message,
    serialize_erasure_message,
)
from schema.table import EntitlementStatus
from tests.docker.compose_services import ComposeRun, timed_install
from tests.support.lake import query_lake

pytestmark = pytest.mark.kcl

# The consumer's cold start through KCL (leases, first assignment) is the long wait here.
_LANDING_TIMEOUT = 300.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeRun]:
    root = tmp_path_factory.mktemp("compose")
    seconds = timed_install(root / "opt-entitlements")
    sys.stderr.write(f"\nscripts/install.py into a fresh environment: {seconds:.0f} s\n")
    run = ComposeRun(prefix=root / "opt-entitlements", root=root)
    try:
        run.up()
        yield run
    finally:
        run.down()


def settings_of(stack: ComposeRun, service: str) -> Settings:
    """The settings the service's command builds from its environment."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in stack.environment(service).items():
            patch.setenv(name, value)
        return load_settings()


def client(settings: Settings, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=settings.aws.endpoint_url,
        region_name=settings.aws.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_the_setup_services_start_before_the_services_that_look_their_queues_up(tmp_path: Path) -> None:
    order = ComposeRun(prefix=tmp_path, root=tmp_path).order()
    assert order.index("cleanup-setup") < min(order.index("consumer"), order.index("cleanup-retry-worker"))
    assert order.index("erasure-setup") < order.index("erasure-worker")


def test_the_consumer_lands_a_record_written_to_the_table(stack: ComposeRun) -> None:
    settings = settings_of(stack, "consumer")
    user = f"user-{uuid.uuid4().hex[:8]}"
    account = f"arr-{uuid.uuid4().hex[:8]}"
    row = entitlement_row(
        user, account, status=EntitlementStatus.ACTIVE, processor_token="tok", now=datetime.now(UTC)
    )
    client(settings, "dynamodb").put_item(**unconditional_put(settings.consumer.table_name, row))

    def landed() -> list[str]:
        stack.assert_running("consumer")
        rows = query_lake(settings, "SELECT event_type FROM changes WHERE user_id = ?", [user])
        return [str(kind) for (kind,) in rows]

    assert stack.wait_for(landed, timeout=_LANDING_TIMEOUT, watching="consumer") == ["entitlement.created"]


def test_the_erasure_worker_answers_a_check(stack: ComposeRun) -> None:
    settings = settings_of(stack, "erasure-worker")
    sns, sqs = client(settings, "sns"), client(settings, "sqs")
    # CreateTopic is idempotent: the ARN of the topic `erasure setup` made.
    topic = sns.create_topic(Name=settings.erasure.topic_name)["TopicArn"]
    request = CheckRequest(
        request_id=f"req-{uuid.uuid4().hex}",
        expires_at=datetime.now(UTC) + timedelta(hours=1),
        key_kind="ACCOUNT",
        key=f"arr-{uuid.uuid4().hex[:8]}",
    )
    sns.publish(TopicArn=topic, Message=serialize_erasure_message(request))
    responses = sqs.get_queue_url(QueueName=settings.erasure.responses_queue_name)["QueueUrl"]

    def answer() -> str | None:
        stack.assert_running("erasure-worker")
        for message in sqs.receive_message(QueueUrl=responses, WaitTimeSeconds=1).get("Messages", []):
            parsed = parse_erasure_message(message["Body"])
            if isinstance(parsed, HoldingsResponse) and parsed.request_id == request.request_id:
                return str(parsed.answer)
        return None

    assert stack.wait_for(answer, timeout=120, watching="erasure-worker") == "HOLDS_NONE"


# What each long-running service's Prometheus endpoint shows once it runs (docs/operations/metrics.md).
METRICS = {
    "localstack": ("service_port", "entitlements_service_requests"),
    "consumer": ("consume_port", "entitlements_consumer_daemon_running"),
    "cleanup-retry-worker": ("retry_worker_port", "entitlements_cleanup_retry_queue_depth"),
    "erasure-worker": ("erasure_worker_port", "entitlements_erasure_answers"),
}


def test_the_metrics_ports_move_to_free_ones_like_the_other_fixed_ports(tmp_path: Path) -> None:
    run = ComposeRun(prefix=tmp_path, root=tmp_path)
    for name, (setting, _) in METRICS.items():
        fixed = int(run.services[name]["environment"][f"ENTITLEMENTS_METRICS__{setting.upper()}"])
        assert getattr(settings_of(run, name).metrics, setting) == run.ports[fixed] != fixed, name


def test_each_long_running_service_serves_its_figures_on_its_metrics_port(stack: ComposeRun) -> None:
    for name, (setting, figure) in METRICS.items():
        metrics = settings_of(stack, name).metrics
        url = f"http://{metrics.host}:{getattr(metrics, setting)}/metrics"

        def scraped(url: str = url, name: str = name) -> str | None:
            stack.assert_running(name)
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    return str(response.read().decode())
            except OSError:  # not serving yet
                return None

        assert f"# TYPE {figure}" in stack.wait_for(scraped, timeout=120, watching=name), name

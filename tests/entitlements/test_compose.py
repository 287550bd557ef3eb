"""entitlements/compose.py: the one composition root, built from the settings, with no AWS side effect."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from config import Settings, load_settings
from entitlements import compose
from processors.cleanup import flush_call_bounds
from tests.support.dynamodb import client

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"


@pytest.fixture
def sqs(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "sqs")


@pytest.fixture
def queue_name() -> str:
    return f"cleanup-retry-{uuid.uuid4().hex[:10]}"


def _settings(moto_endpoint: str, tmp_path: Path, queue_name: str | None = None, **consumer: Any) -> Settings:
    """A test's own retry queue (`queue_name`, else a fresh one): the session's moto is shared."""
    return load_settings(
        aws={"endpoint_url": moto_endpoint, "access_key_id": "testing", "secret_access_key": "testing"},
        consumer={"state_dir": tmp_path / "state", "stream_arn": STREAM, **consumer},
        lake={"root": str(tmp_path / "lake")},
        array={"retry_budget_seconds": 3.0},
        cleanup={"retry_queue_name": queue_name or f"cleanup-retry-{uuid.uuid4().hex[:10]}"},
    )


def _queue_names(sqs: Any) -> set[str]:
    return {url.rsplit("/", 1)[-1] for url in sqs.list_queues().get("QueueUrls", [])}


def test_the_cleanup_handler_refuses_to_build_before_its_setup_naming_the_command(
    moto_endpoint: str, tmp_path: Path, queue_name: str
) -> None:
    with pytest.raises(compose.SetupMissingError, match="entitlements cleanup setup"):
        compose.cleanup_handler(_settings(moto_endpoint, tmp_path, queue_name), sink=None)


def test_building_the_cleanup_handler_creates_no_queue(
    moto_endpoint: str, tmp_path: Path, sqs: Any, queue_name: str
) -> None:
    before = _queue_names(sqs)
    with pytest.raises(compose.SetupMissingError):
        compose.cleanup_handler(_settings(moto_endpoint, tmp_path, queue_name), sink=None)
    assert _queue_names(sqs) == before


def test_the_setup_makes_the_retry_queue_and_its_dead_letter_queue(
    moto_endpoint: str, tmp_path: Path, sqs: Any, queue_name: str
) -> None:
    compose.setup_retry_queues(_settings(moto_endpoint, tmp_path, queue_name))
    assert {queue_name, f"{queue_name}-dlq"} <= _queue_names(sqs)


def test_after_the_setup_the_handler_uses_the_queue_and_the_settings(
    moto_endpoint: str, tmp_path: Path, sqs: Any, queue_name: str
) -> None:
    settings = _settings(moto_endpoint, tmp_path, queue_name)
    queues = compose.setup_retry_queues(settings)
    handler = compose.cleanup_handler(settings, sink=None)
    assert (handler.name, handler.retry_budget_seconds, handler._queue_url) == (
        "cleanup",
        3.0,
        queues.queue_url,
    )


def test_the_cleanup_processor_is_flushed_before_the_lake_it_feeds(
    moto_endpoint: str, tmp_path: Path, sqs: Any
) -> None:
    settings = _settings(moto_endpoint, tmp_path)
    compose.setup_retry_queues(settings)
    registry = compose.handler_registry(settings)
    assert ([h.name for h in registry], registry.feeds("cleanup")) == (["cleanup", "lake"], ("lake",))


def test_the_journal_is_registered_when_the_settings_name_one(moto_endpoint: str, tmp_path: Path) -> None:
    settings = _settings(moto_endpoint, tmp_path, event_journal=tmp_path / "journal.jsonl")
    compose.setup_retry_queues(settings)
    assert "journal" in compose.handler_registry(settings)


def test_the_shard_consumer_refuses_to_build_without_a_stream(moto_endpoint: str, tmp_path: Path) -> None:
    settings = _settings(moto_endpoint, tmp_path, stream_arn=None)
    with pytest.raises(compose.SetupMissingError, match="ENTITLEMENTS_CONSUMER__STREAM_ARN"):
        compose.shard_consumer(settings)


def test_the_lake_eraser_works_on_the_settings_lake(moto_endpoint: str, tmp_path: Path) -> None:
    eraser = compose.lake_eraser(_settings(moto_endpoint, tmp_path))
    assert eraser.lake.base == str((tmp_path / "lake").resolve())


def test_building_the_shard_consumer_makes_the_state_folder_owner_only(
    moto_endpoint: str, tmp_path: Path, sqs: Any
) -> None:
    settings = _settings(moto_endpoint, tmp_path)
    settings.consumer.state_dir.mkdir(mode=0o755)
    settings.consumer.state_dir.chmod(0o755)
    compose.setup_retry_queues(settings)
    compose.shard_consumer(settings)
    assert settings.consumer.state_dir.stat().st_mode & 0o777 == 0o700


def test_the_erasure_worker_refuses_to_build_before_its_setup_naming_the_command(
    moto_endpoint: str, tmp_path: Path
) -> None:
    settings = load_settings(
        aws={"endpoint_url": moto_endpoint, "access_key_id": "testing", "secret_access_key": "testing"},
        consumer={"state_dir": tmp_path / "state"},
        lake={"root": str(tmp_path / "lake")},
        erasure={"queue_name": f"erasure-{uuid.uuid4().hex[:8]}"},
    )
    with pytest.raises(compose.SetupMissingError, match="entitlements erasure setup"):
        compose.erasure_worker(settings, settings.erasure, wait_seconds=1)


def test_the_cleanup_clients_keep_each_call_inside_the_flush_budget(
    moto_endpoint: str, tmp_path: Path, queue_name: str
) -> None:
    settings = _settings(moto_endpoint, tmp_path, queue_name)
    compose.setup_retry_queues(settings)
    clients = compose._CleanupClients(settings)
    bounds = flush_call_bounds(settings.array.retry_budget_seconds)
    configs = (clients.dynamodb.meta.config, clients.sqs.meta.config)
    assert {(c.connect_timeout, c.read_timeout) for c in configs} == {
        (bounds["connect_timeout"], bounds["read_timeout"])
    }


def test_importing_the_composition_root_leaves_the_web_framework_unimported() -> None:
    # The KCL child imports the composition root and never serves: it must not pay for FastAPI.
    probe = "import sys, entitlements.compose; print(sorted({'fastapi', 'uvicorn'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"

"""`entitlements cleanup setup | retry-worker | repair`: against moto and the fake Array, with a local lake.
(The handler the KCL child registers is built by entitlements.compose: tests/entitlements/test_compose.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics import LakeDeletedAccounts, open_lake
from config import load_settings
from devstack.fake_array import FakeArrayServer
from entitlements import compose
from entitlements.cli import app as cli
from schema.outcomes import OutcomeKind
from schema.table import ItemKind
from tests.processors.cleanup.cleanup_helpers import NOW, ListSink, make_expiry
from tests.support.outcomes import cleanup_outcome, land_outcomes

runner = CliRunner()


@pytest.fixture
def queue_name() -> str:
    return f"cleanup-retry-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def env(moto_endpoint: str, tmp_path: Path, table: str, fake_array: FakeArrayServer) -> dict[str, str]:
    return {
        "ENTITLEMENTS_AWS__ENDPOINT_URL": moto_endpoint,
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": "testing",
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": "testing",
        "ENTITLEMENTS_CONSUMER__TABLE_NAME": table,
        "ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake"),
        # The deletion notes and the parked work live there: never in the folder the tests run from.
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state"),
        "ENTITLEMENTS_ARRAY__BASE_URL": fake_array.url,
        "ENTITLEMENTS_ARRAY__RETRY_BUDGET_SECONDS": "3",
    }


_outcome = partial(cleanup_outcome, occurred_at=NOW)


def test_setup_creates_the_retry_queue_and_its_dead_letter_queue(
    env: dict[str, str], queue_name: str, sqs: Any
) -> None:
    result = runner.invoke(cli, ["cleanup", "setup", "--queue-name", queue_name], env=env)
    assert result.exit_code == 0, result.output
    url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
    dlq = sqs.get_queue_url(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    assert f"retry queue: {url}" in result.output
    assert f"dead-letter queue: {dlq}" in result.output
    assert runner.invoke(cli, ["cleanup", "setup", "--queue-name", queue_name], env=env).exit_code == 0


def test_repair_dry_run_lists_the_unmarked_rows_and_changes_nothing(
    env: dict[str, str],
    tmp_path: Path,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    get_row: Callable[[str, str], dict[str, str] | None],
) -> None:
    put_rows([("u1", "acct-1", "Superseded"), ("u2", "acct-2", "Removed"), ("u3", "acct-3", "Cancelled")])
    land_outcomes(
        open_lake(str(tmp_path / "lake")),
        _outcome(OutcomeKind.CLEANUP_DELETED, "u1", "acct-1"),
        _outcome(OutcomeKind.CLEANUP_DELETED, "u2", "acct-2"),
    )
    result = runner.invoke(cli, ["cleanup", "repair", "--dry-run"], env=env)
    assert result.exit_code == 0, result.output
    assert "USER#u1 ENTITLEMENT#acct-1 status=Superseded: would mark Removed" in result.output
    assert "acct-2" not in result.output  # already Removed
    assert "acct-3" not in result.output  # not deleted by cleanup
    assert (get_row("u1", "acct-1") or {})["status"] == "Superseded"


def test_repair_marks_removed_every_row_whose_account_the_lake_shows_deleted(
    env: dict[str, str],
    tmp_path: Path,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    get_row: Callable[[str, str], dict[str, str] | None],
) -> None:
    put_rows([("u1", "acct-1", "Superseded"), ("u2", "acct-2", "Cancelled"), ("u3", "acct-3", "Cancelled")])
    land_outcomes(
        open_lake(str(tmp_path / "lake")),
        _outcome(OutcomeKind.CLEANUP_DELETED, "u1", "acct-1"),
        _outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, "u2", "acct-2"),
    )
    result = runner.invoke(cli, ["cleanup", "repair"], env=env)
    assert result.exit_code == 0, result.output
    assert "2 marked, 0 already Removed, 0 failed" in result.output
    assert (get_row("u1", "acct-1") or {})["status"] == "Removed"
    assert (get_row("u2", "acct-2") or {})["status"] == "Removed"
    assert (get_row("u3", "acct-3") or {})["status"] == "Cancelled"
    again = runner.invoke(cli, ["cleanup", "repair"], env=env)
    assert "0 row(s) not Removed" in again.output


def test_the_retry_worker_command_drains_parked_work_and_lands_its_outcomes(
    env: dict[str, str],
    tmp_path: Path,
    queue_name: str,
    dynamodb: Any,
    sqs: Any,
    table: str,
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Cancelled")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(cleanup={"retry_queue_name": queue_name})
    sink = ListSink()
    compose.setup_retry_queues(settings)  # `entitlements cleanup setup`
    handler = compose.cleanup_handler(settings, sink)
    fake_array.expire_credentials()
    handler.add(make_expiry("u1", "acct-1", ItemKind.CANCELLATION))
    handler.flush()
    fake_array.restore_credentials()
    assert sink.kinds() == [OutcomeKind.CLEANUP_PARKED]

    result = runner.invoke(cli, ["cleanup", "retry-worker", "--drain", "--queue-name", queue_name], env=env)
    assert result.exit_code == 0, result.output
    assert "finished 1" in result.output
    assert "queue empty" in result.output
    assert fake_array.deleted_users() == ["acct-1"]
    assert (get_row("u1", "acct-1") or {})["status"] == "Removed"
    assert list(LakeDeletedAccounts(open_lake(str(tmp_path / "lake"))).deleted_accounts()) == [
        ("u1", "acct-1")
    ]

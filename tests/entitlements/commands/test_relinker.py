"""entitlements/commands/relinker.py: `entitlements relinker setup | enqueue | run` on the local stack
(moto, the fake Array and the fake transactions-service on loopback)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from config import load_settings
from devstack.fake_array import FakeArrayServer
from devstack.fake_transactions import FakeTransactionsServer
from entitlements import compose
from entitlements.cli import app as cli
from pipeline.tables import create_table
from tests.support.dynamodb import unique_table_name


@pytest.fixture
def env(moto_endpoint: str, dynamodb: Any, tmp_path: Path) -> Iterator[dict[str, str]]:
    table = create_table(dynamodb, unique_table_name("relink")).table_name
    with (
        FakeArrayServer(host="127.0.0.1", port=0, every_account_exists=True) as array,
        FakeTransactionsServer(host="127.0.0.1", port=0) as transactions,
    ):
        yield {
            "ENTITLEMENTS_AWS__ENDPOINT_URL": moto_endpoint,
            "ENTITLEMENTS_ARRAY__BASE_URL": array.url,
            "ENTITLEMENTS_SERVICE__TRANSACTIONS_BASE_URL": transactions.url,
            "ENTITLEMENTS_SERVICE__RELINKER_QUEUE_NAME": f"relink-{uuid.uuid4().hex[:8]}",
            "ENTITLEMENTS_CONSUMER__TABLE_NAME": table,
            "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state"),
            "ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake"),
        }


def test_enqueue_needs_users_or_all_active(env: dict[str, str]) -> None:
    result = CliRunner().invoke(cli, ["relinker", "enqueue"], env=env)
    assert result.exit_code == 2
    assert "give --user (one or more) or --all-active" in result.output


@pytest.mark.parametrize("refused", ["", "-leading-dash", "a/b", "x" * 129, "trailing\n"])
def test_enqueue_refuses_an_id_the_service_refuses_and_sends_nothing(
    env: dict[str, str], refused: str
) -> None:
    result = CliRunner().invoke(cli, ["relinker", "enqueue", "--user", "u-ok", "--user", refused], env=env)
    assert result.exit_code == 2
    assert "1 --user value(s) not a user id" in result.output
    assert refused.strip() == "" or refused.strip() not in result.output


def test_a_drained_run_with_a_failed_job_exits_1(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runner = CliRunner()
    assert runner.invoke(cli, ["relinker", "setup"]).exit_code == 0
    assert runner.invoke(cli, ["relinker", "enqueue", "--user", "u-unknown"]).exit_code == 0
    ran = runner.invoke(cli, ["relinker", "run", "--drain", "--max-seconds", "60"])
    assert "failed 1," in ran.output  # an unknown user: a failed link
    assert ran.exit_code == 1


def test_setup_enqueue_and_a_drained_run_link_the_user_and_land_the_outcome(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    parts = compose.service_parts(load_settings())
    parts.service.signup("u-1")
    runner = CliRunner()
    assert runner.invoke(cli, ["relinker", "setup"]).exit_code == 0
    enqueued = runner.invoke(cli, ["relinker", "enqueue", "--all-active"])
    ran = runner.invoke(cli, ["relinker", "run", "--drain", "--max-seconds", "60"])
    assert "enqueued 1 relink job(s)" in enqueued.output
    assert ran.exit_code == 0, ran.output
    assert "linked 1," in ran.output
    kinds = [
        kind
        for path in (tmp_path / "lake").rglob("*.parquet")
        if "kind" in (table := pq.read_table(path)).column_names
        for kind in table["kind"].to_pylist()
    ]
    assert kinds == ["link.linked"]

"""`entitlements simulate`."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from entitlements.cli import app
from pipeline.tables import TableDescription, create_table
from tests.support.dynamodb import REGION, items_of, unique_table_name

runner = CliRunner()
START = datetime(2030, 6, 1, tzinfo=UTC)


@pytest.fixture
def table(dynamodb: Any) -> TableDescription:
    return create_table(dynamodb, unique_table_name("sim"))


def local_env(endpoint: str, table: TableDescription, **extra: str) -> dict[str, str]:
    return {
        "ENTITLEMENTS_AWS__ENDPOINT_URL": endpoint,
        "ENTITLEMENTS_AWS__REGION": REGION,
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": "testing",
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": "testing",
        "ENTITLEMENTS_CONSUMER__TABLE_NAME": table.table_name,
        # A simulated clock that barely moves: business times and ttls are predictable.
        "ENTITLEMENTS_CLOCK__START": START.isoformat(),
        "ENTITLEMENTS_CLOCK__ANCHOR": datetime.now(UTC).isoformat(),
        "ENTITLEMENTS_CLOCK__SPEED": "0.000001",
        **extra,
    }


def invoke(endpoint: str, table: TableDescription, *args: str, **extra: str) -> Any:
    return runner.invoke(app, ["simulate", *args], env=local_env(endpoint, table, **extra))


def test_simulate_writes_the_workload_to_the_configured_table(
    moto_endpoint: str, dynamodb: Any, table: TableDescription
) -> None:
    result = invoke(moto_endpoint, table, "--users", "3", "--operations", "10", "--seed", "1")
    assert (result.exit_code, len(items_of(dynamodb, table.table_name)) > 0) == (0, True)


def test_simulate_prints_the_summary_as_json(moto_endpoint: str, table: TableDescription) -> None:
    result = invoke(moto_endpoint, table, "--operations", "20", "--seed", "1")
    summary = json.loads(result.stdout)
    assert sum(summary["operations"].values()) + summary["idle"] == 20


def test_the_printed_summary_holds_no_user_ids(
    moto_endpoint: str, dynamodb: Any, table: TableDescription
) -> None:
    result = invoke(moto_endpoint, table, "--operations", "30", "--faults", "--seed", "2")
    users = {i["userId"]["S"] for i in items_of(dynamodb, table.table_name)}
    assert [u for u in users if u in result.output] == []


def test_the_full_summary_file_is_private_and_names_the_planted_items(
    moto_endpoint: str, table: TableDescription, tmp_path: Path
) -> None:
    path = tmp_path / "out" / "summary.json"
    invoke(moto_endpoint, table, "--operations", "5", "--faults", "--summary-json", str(path))
    written = json.loads(path.read_text())
    assert (stat.S_IMODE(path.stat().st_mode), all(f["items"] for f in written["planted_faults"])) == (
        0o600,
        True,
    )


def test_simulate_reports_the_seed_it_chose(moto_endpoint: str, table: TableDescription) -> None:
    result = invoke(moto_endpoint, table, "--operations", "1")
    assert isinstance(json.loads(result.stdout)["seed"], int)


def test_fault_count_sets_how_many_of_each_fault_are_planted(
    moto_endpoint: str, table: TableDescription
) -> None:
    result = invoke(moto_endpoint, table, "--operations", "5", "--faults", "--fault-count", "2")
    assert set(json.loads(result.stdout)["faults"].values()) == {2}


def test_the_cleanup_ttl_days_come_from_the_policy_settings(
    moto_endpoint: str, dynamodb: Any, table: TableDescription
) -> None:
    invoke(
        moto_endpoint,
        table,
        "--users", "1", "--operations", "2", "--signup-weight", "1", "--cancel-weight", "1",
        "--reactivate-weight", "0", "--second-signup-weight", "0", "--relink-weight", "0",
        ENTITLEMENTS_POLICY__CLEANUP_TTL_DAYS="5",
    )  # fmt: skip
    (record,) = [i for i in items_of(dynamodb, table.table_name) if i["sk"]["S"] == "CLEANUP#CANCELLATION"]
    assert record["ttl"] == {"N": str(int(START.timestamp()) + 5 * 86400)}


def test_an_all_zero_mix_is_a_usage_error(moto_endpoint: str, table: TableDescription) -> None:
    zero = ["--signup-weight", "0", "--cancel-weight", "0", "--reactivate-weight", "0"]
    zero += ["--second-signup-weight", "0", "--relink-weight", "0"]
    assert invoke(moto_endpoint, table, *zero).exit_code == 2


def test_a_missing_table_fails_with_the_error_code_only(moto_endpoint: str) -> None:
    missing = TableDescription(unique_table_name("missing"), "arn", "arn", created=False)
    result = invoke(moto_endpoint, missing, "--operations", "1")
    assert (result.exit_code, result.stderr.strip()) == (
        1,
        "simulate failed: DynamoDB PutItem failed: ResourceNotFoundException",
    )

"""`entitlements simulate`."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from entitlements.cli import app
from pipeline.tables import TableDescription, create_table
from tests.support.dynamodb import REGION, items_of, unique_table_name
from tests.support.local_world import World, local_world

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


@pytest.fixture
def world(moto_endpoint: str, table: TableDescription, tmp_path: Path) -> Iterator[World]:
    with local_world(endpoint=moto_endpoint, table_name=table.table_name, state_dir=tmp_path) as running:
        yield running


def service_env(world: World, **extra: str) -> dict[str, str]:
    return {
        "ENTITLEMENTS_ARRAY__BASE_URL": world.array.url,
        "ENTITLEMENTS_SERVICE__TRANSACTIONS_BASE_URL": world.transactions.url,
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(world.settings.consumer.state_dir),
        "ENTITLEMENTS_LAKE__ROOT": world.settings.lake.root,
        **extra,
    }


def test_simulate_writes_the_workload_to_the_configured_table(
    moto_endpoint: str, dynamodb: Any, table: TableDescription, world: World
) -> None:
    result = invoke(
        moto_endpoint, table, "--users", "3", "--operations", "10", "--seed", "1", **service_env(world)
    )
    assert (result.exit_code, len(items_of(dynamodb, table.table_name)) > 0) == (0, True)


def test_simulate_prints_the_summary_as_json(
    moto_endpoint: str, table: TableDescription, world: World
) -> None:
    result = invoke(moto_endpoint, table, "--operations", "20", "--seed", "1", **service_env(world))
    summary = json.loads(result.stdout)
    assert sum(summary["operations"].values()) + summary["idle"] == 20


def test_the_printed_summary_holds_no_user_ids(
    moto_endpoint: str, dynamodb: Any, table: TableDescription, world: World
) -> None:
    result = invoke(
        moto_endpoint, table, "--operations", "30", "--faults", "--seed", "2", **service_env(world)
    )
    users = {i["userId"]["S"] for i in items_of(dynamodb, table.table_name)}
    assert [u for u in users if u in result.output] == []


def test_the_full_summary_file_is_private_and_names_the_planted_items(
    moto_endpoint: str, table: TableDescription, tmp_path: Path, world: World
) -> None:
    path = tmp_path / "out" / "summary.json"
    invoke(
        moto_endpoint,
        table,
        "--operations",
        "5",
        "--faults",
        "--summary-json",
        str(path),
        **service_env(world),
    )
    written = json.loads(path.read_text())
    assert (stat.S_IMODE(path.stat().st_mode), all(f["items"] for f in written["planted_faults"])) == (
        0o600,
        True,
    )


def test_simulate_reports_the_seed_it_chose(
    moto_endpoint: str, table: TableDescription, world: World
) -> None:
    result = invoke(moto_endpoint, table, "--operations", "1", **service_env(world))
    assert isinstance(json.loads(result.stdout)["seed"], int)


def test_fault_count_sets_how_many_of_each_fault_are_planted(
    moto_endpoint: str, table: TableDescription, world: World
) -> None:
    result = invoke(
        moto_endpoint, table, "--operations", "5", "--faults", "--fault-count", "2", **service_env(world)
    )
    assert set(json.loads(result.stdout)["faults"].values()) == {2}


def test_the_cleanup_ttl_days_come_from_the_policy_settings(
    moto_endpoint: str, dynamodb: Any, table: TableDescription, world: World
) -> None:
    invoke(
        moto_endpoint,
        table,
        "--users", "1", "--operations", "2", "--signup-weight", "1", "--cancel-weight", "1",
        "--reactivate-weight", "0", "--second-signup-weight", "0", "--relink-weight", "0",
        **service_env(world, ENTITLEMENTS_POLICY__CLEANUP_TTL_DAYS="5"),
    )  # fmt: skip
    (record,) = [i for i in items_of(dynamodb, table.table_name) if i["sk"]["S"] == "CLEANUP#CANCELLATION"]
    assert record["ttl"] == {"N": str(int(START.timestamp()) + 5 * 86400)}


def test_without_clients_the_mix_goes_through_the_services_own_code(
    moto_endpoint: str, table: TableDescription, world: World
) -> None:
    result = invoke(
        moto_endpoint, table, "--users", "4", "--operations", "12", "--seed", "3",
        "--cancel-weight", "0", "--reactivate-weight", "0", "--second-signup-weight", "0",
        "--relink-weight", "0", **service_env(world),
    )  # fmt: skip
    summary = json.loads(result.stdout)
    # Each signup is the service's: it asked the fake Array for the account (a direct write would not).
    assert (summary["mode"], world.array.call_count_of("create_user")) == (
        "service",
        summary["operations"]["signup"],
    )


def test_an_all_zero_mix_is_a_usage_error(moto_endpoint: str, table: TableDescription) -> None:
    zero = ["--signup-weight", "0", "--cancel-weight", "0", "--reactivate-weight", "0"]
    zero += ["--second-signup-weight", "0", "--relink-weight", "0"]
    assert invoke(moto_endpoint, table, *zero).exit_code == 2


def test_a_missing_table_is_one_line_naming_the_command_that_makes_it(moto_endpoint: str) -> None:
    missing = TableDescription(unique_table_name("missing"), "arn", "arn", created=False)
    result = invoke(moto_endpoint, missing, "--operations", "1")
    assert (result.exit_code, result.stderr.strip()) == (
        2,
        f"entitlements: the entitlements table {missing.table_name} does not exist: run "
        "`entitlements table create`, or set ENTITLEMENTS_CONSUMER__TABLE_NAME to the table's name",
    )


# ---- --clients N: the workload through the service ---------------------------------------------------


def test_with_clients_the_mix_goes_through_the_service_and_every_user_signs_up_first(
    moto_endpoint: str, table: TableDescription, world: World
) -> None:
    result = invoke(
        moto_endpoint, table, "--clients", "4", "--users", "6", "--operations", "40", "--seed", "2",
        **service_env(world),
    )  # fmt: skip
    summary = json.loads(result.stdout)
    assert (summary["mode"], summary["answers"]["signup"], world.array.call_count_of("create_user") >= 6) == (
        "service",
        {"201": 6},
        True,
    )


def test_with_clients_the_service_counts_what_the_clients_sent(
    moto_endpoint: str, table: TableDescription, world: World
) -> None:
    result = invoke(
        moto_endpoint, table, "--clients", "3", "--operations", "30", "--seed", "4", **service_env(world)
    )
    summary = json.loads(result.stdout)
    outcomes = summary["service_stats"]["outcomes"]
    links = sum(count for kind, count in outcomes.items() if kind.startswith("link."))
    assert links == summary["operations"]["relink"]


def test_concurrent_same_user_sends_simultaneous_requests_for_one_user_through_the_service(
    moto_endpoint: str, table: TableDescription, world: World
) -> None:
    result = invoke(
        moto_endpoint, table, "--clients", "2", "--users", "8", "--operations", "30", "--seed", "3",
        "--concurrent-same-user", "20", **service_env(world),
    )  # fmt: skip
    bursts = json.loads(result.stdout)["concurrent_same_user"]
    assert (bursts["bursts"] > 0, bursts["requests"], bursts["undocumented"]) == (
        True,
        2 * bursts["bursts"],
        0,
    )


def test_concurrent_same_user_needs_clients(moto_endpoint: str, table: TableDescription) -> None:
    result = invoke(moto_endpoint, table, "--concurrent-same-user", "2")
    assert (result.exit_code, "--concurrent-same-user needs --clients" in result.output) == (2, True)


def test_faults_with_clients_are_planted_by_direct_writes_and_labelled_so(
    moto_endpoint: str, table: TableDescription, world: World
) -> None:
    result = invoke(
        moto_endpoint, table, "--clients", "2", "--operations", "10", "--faults", **service_env(world)
    )
    kinds = sorted(f["kind"] for f in json.loads(result.stdout)["planted_by_direct_write"])
    assert kinds == ["failed_reactivation_delete", "millisecond_ttl", "string_ttl", "token_canary"]


def test_unguarded_links_report_what_the_unconditional_put_overwrote(
    moto_endpoint: str, table: TableDescription, world: World
) -> None:
    result = invoke(
        moto_endpoint,
        table,
        "--clients",
        "2",
        "--operations",
        "30",
        "--unguarded-links",
        **service_env(world),
    )
    assert set(json.loads(result.stdout)["unguarded_links"]) == {
        "overwritten",
        "overwritten_cancelled",
        "recreated",
        "unchanged",
    }


def test_unguarded_links_are_refused_when_an_endpoint_is_not_loopback(
    moto_endpoint: str, table: TableDescription, world: World
) -> None:
    env = service_env(world, ENTITLEMENTS_ARRAY__BASE_URL="https://array.example.com")
    result = invoke(moto_endpoint, table, "--clients", "2", "--unguarded-links", **env)
    assert (result.exit_code, "array.base_url is not loopback" in result.stderr) == (2, True)


def test_unguarded_links_need_the_in_process_service(moto_endpoint: str, table: TableDescription) -> None:
    result = invoke(moto_endpoint, table, "--unguarded-links")
    assert result.exit_code == 2


def test_with_clients_the_printed_summary_holds_no_user_ids(
    moto_endpoint: str, dynamodb: Any, table: TableDescription, world: World
) -> None:
    result = invoke(moto_endpoint, table, "--clients", "2", "--operations", "20", **service_env(world))
    users = {item["userId"]["S"] for item in items_of(dynamodb, table.table_name)}
    assert users and not any(user in result.stdout for user in users)

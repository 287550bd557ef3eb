"""The demo's audit: the simulator's writes on moto, read back from the table's stream,
decoded by the real decoder, landed by the lake's handler and audited. A clean run has no findings; with
`--faults` the audit finds exactly the anomalies planted, on exactly the planted items."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from analytics.audits import AuditReport, render_report, run_audits
from analytics.lake import LakeHandler, open_lake
from devstack.direct_writes import DirectWrites
from devstack.planted_faults import CANARY_TOKEN_PREFIX, FaultKind
from devstack.simulator import run_simulation
from devstack.workload import SimulationConfig, SimulationSummary
from pipeline.decode import decode_stream_record
from pipeline.tables import TableDescription, create_table
from tests.analytics.audits.conftest import found, keys
from tests.analytics.lake.delta_files import data_files
from tests.support.dynamodb import FixedClock, unique_table_name

NOW = datetime(2030, 6, 1, tzinfo=UTC)

# What each planted fault must make the audit report, check by check: the planted items' roles whose
# (pk, sk) the check's rows name. docs/table.md says what the stale put race leaves: a row made Active again,
# "the user with two active rows", and the stale record naming an account in use.
EXPECTED: dict[FaultKind, dict[str, set[str]]] = {
    FaultKind.STALE_PUT_RACE: {
        "stale_write": {"resurrected_row"},
        "duplicate_active_rows": {"resurrected_row", "new_row"},
        "duplicate_active_rows_ever": {"resurrected_row", "new_row"},
        "cleanup_names_active_account": {"stale_record_naming_account_in_use"},
        "cleanup_names_active_account_ever": {"stale_record_naming_account_in_use"},
    },
    FaultKind.FAILED_REACTIVATION_DELETE: {
        "cleanup_names_active_account": {"cancellation_record_left_behind"},
        "cleanup_names_active_account_ever": {"cancellation_record_left_behind"},
    },
    FaultKind.STRING_TTL: {
        "cleanup_ttl_not_actionable": {"cancellation_record_string_ttl"},
        "cleanup_ttl_not_actionable_ever": {"cancellation_record_string_ttl"},
    },
    FaultKind.MILLISECOND_TTL: {
        "cleanup_ttl_not_actionable": {"stale_record_millisecond_ttl"},
        "cleanup_ttl_not_actionable_ever": {"stale_record_millisecond_ttl"},
    },
    FaultKind.TOKEN_CANARY: {},
}


@pytest.fixture
def table(dynamodb: Any) -> Iterator[TableDescription]:
    yield create_table(dynamodb, unique_table_name("audit"))


def simulate_and_audit(
    dynamodb: Any, streams: Any, table: TableDescription, root: Path, *, faults: bool
) -> tuple[SimulationSummary, AuditReport]:
    config = SimulationConfig(
        table_name=table.table_name, users=25, operations=150, seed=3, faults=faults, faults_per_kind=2
    )
    summary = run_simulation(config, DirectWrites(dynamodb, table.table_name), FixedClock(NOW))
    lake = open_lake(str(root / "lake"))
    handler = LakeHandler(lake)
    shards = streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"]
    for shard in shards:
        iterator = streams.get_shard_iterator(
            StreamArn=table.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            for record in page["Records"]:
                handler.add(
                    decode_stream_record(record, stream_arn=table.stream_arn, shard_id=shard["ShardId"])
                )
            iterator = page.get("NextShardIterator") if page["Records"] else None
    handler.flush()
    return summary, run_audits(lake)


def test_a_clean_simulated_run_has_no_findings(
    dynamodb: Any, streams: Any, table: TableDescription, tmp_path: Path
) -> None:
    summary, report = simulate_and_audit(dynamodb, streams, table, tmp_path, faults=False)
    assert sum(summary.operations.values()) > 100 and summary.guard_rejections > 0
    assert found(report) == {}


def test_a_simulated_run_with_faults_has_exactly_the_planted_findings(
    dynamodb: Any, streams: Any, table: TableDescription, tmp_path: Path
) -> None:
    summary, report = simulate_and_audit(dynamodb, streams, table, tmp_path, faults=True)
    expected: dict[str, set[tuple[str, str]]] = {}
    for fault in summary.planted_faults:
        roles = {item.role: (item.pk, item.sk) for item in fault.items}
        for check, wanted in EXPECTED[fault.kind].items():
            expected.setdefault(check, set()).update(roles[role] for role in wanted)
    assert {check: keys(report, check) for check in found(report)} == expected
    reasons = {row["reason"] for row in report.result("cleanup_ttl_not_actionable").rows}
    assert reasons == {"string", "milliseconds"}
    assert report.result("duplicate_active_rows").groups == summary.faults["stale_put_race"] == 2


def test_the_canary_tokens_reach_neither_the_lake_nor_the_report(
    dynamodb: Any, streams: Any, table: TableDescription, tmp_path: Path
) -> None:
    summary, report = simulate_and_audit(dynamodb, streams, table, tmp_path, faults=True)
    canaries = [f.processor_token for f in summary.planted_faults if f.processor_token]
    assert canaries and all(c.startswith(CANARY_TOKEN_PREFIX) for c in canaries)
    lake = open_lake(str(tmp_path / "lake"))
    landed = b"".join((tmp_path / "lake" / path).read_bytes() for path in data_files(lake, "changes"))
    rendered = "".join(render_report(report, fmt) for fmt in ("markdown", "json", "html"))
    for canary in canaries:
        assert canary.encode() not in landed and canary not in rendered

"""The bootstrap without an export: a parallel Scan with segments (analytics.bootstrap.bootstrap_scan)."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from analytics.bootstrap import CAVEAT, BootstrapReport, bootstrap_scan, scans_in_lake
from analytics.lake import CHANGES, Lake
from analytics.lake.history_start import history_start
from config import BootstrapSettings, LakeSettings
from schema.errors import RetryableError
from schema.table import EntitlementStatus
from schema.table_writes import entitlement_row
from tests.analytics.lake.test_bootstrap import (
    NOW,
    Stack,
    _landed_identities,
    _now_audits,
    _state,
    lake,
    lake_of_the_table,
    stack,
    write_history,
)

__all__ = ["lake", "stack"]  # fixtures shared with the export's tests


def _scan(stack: Stack, lake: Lake, dynamodb: Any = None, lines: list[str] | None = None) -> BootstrapReport:
    told = lines if lines is not None else []
    return bootstrap_scan(
        dynamodb or stack.dynamodb,
        table_name=stack.table_name,
        table_arn=stack.table_arn,
        streams=stack.streams,
        stream_arn=stack.stream_arn,
        lake=lake,
        lake_settings=LakeSettings(),
        allow_list=None,
        settings=BootstrapSettings(scan_segments=4, scan_page_items=5),
        now=datetime.now(UTC),
        accept_gap=False,
        progress=told.append,
    )


def test_a_scan_racing_writes_then_the_stream_gives_the_tables_state(
    stack: Stack, lake: Lake, tmp_path: Path
) -> None:
    write_history(stack, 40)
    stack.enable_stream()
    stop = threading.Event()

    def race() -> None:
        rng = random.Random(11)
        index = 0
        while not stop.is_set():
            user = rng.randrange(40)
            if rng.random() < 0.6:
                stack.set_status(f"u{user}", f"a{user}", rng.choice(list(EntitlementStatus)))
            else:
                stack.put(entitlement_row(f"n{index}", f"b{index}", now=NOW))
            index += 1

    racer = threading.Thread(target=race)
    racer.start()
    try:
        lines: list[str] = []
        report = _scan(stack, lake, lines=lines)
    finally:
        stop.set()
        racer.join()
    assert CAVEAT in lines
    assert any(line.startswith("segment ") for line in lines)
    assert report.files_landed == 4
    stack.consume(lake)
    table_lake = lake_of_the_table(stack, tmp_path / "table")
    assert _state(lake) == _state(table_lake)
    assert _now_audits(lake) == _now_audits(table_lake)


def test_a_rerun_after_a_whole_scan_lands_nothing(stack: Stack, lake: Lake) -> None:
    write_history(stack, 30)
    stack.enable_stream()
    first = _scan(stack, lake)
    second = _scan(stack, lake)
    assert first.items_landed == 37  # 30 rows, 6 cancellation records, a second Active row
    assert second.items_landed == 0 and second.source_arn == first.source_arn
    assert _landed_identities(lake, first.source_arn) == (37, 37)


class _FailsOnce:
    """A DynamoDB client whose Scan of one segment fails the first time (a crash part-way)."""

    def __init__(self, dynamodb: Any, segment: int) -> None:
        self._dynamodb = dynamodb
        self._segment = segment
        self.failed = False

    def scan(self, **kwargs: Any) -> dict[str, Any]:
        if kwargs["Segment"] == self._segment and not self.failed:
            self.failed = True
            raise RetryableError("scan interrupted")
        answer: dict[str, Any] = self._dynamodb.scan(**kwargs)
        return answer


def test_a_scan_stopped_part_way_is_resumed_and_lands_each_item_once(stack: Stack, lake: Lake) -> None:
    write_history(stack, 30)
    stack.enable_stream()
    with pytest.raises(RetryableError):
        _scan(stack, lake, dynamodb=_FailsOnce(stack.dynamodb, segment=2))
    (partial,) = scans_in_lake(lake, stack.table_arn)
    assert 2 not in partial.landed
    resumed = _scan(stack, lake)
    assert resumed.source_arn == partial.source_arn
    assert resumed.exported_at == partial.started_at
    assert _landed_identities(lake, partial.source_arn) == (37, 37)


def test_a_scan_keeps_its_start_as_the_lakes_history_start(stack: Stack, lake: Lake) -> None:
    write_history(stack, 10)
    stack.enable_stream()
    report = _scan(stack, lake)
    assert report.history_starts_at == report.exported_at
    assert history_start(DeltaTable(lake.table_uri(CHANGES))) == report.exported_at

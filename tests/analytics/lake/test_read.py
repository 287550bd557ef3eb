"""analytics/lake/_read.py: what every read checks first, writing nothing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from analytics.lake import (
    Lake,
    LakeMissing,
    NoDataAsOf,
    default_allow_list,
    open_lake,
    require_as_of,
    require_data,
)
from analytics.lake._errors import LakeUnreachable
from analytics.lake._files import ensure_layout
from analytics.lake._read import first_change_at
from tests.analytics.lakesim import TableSim, land


def test_a_lake_without_a_changes_table_is_missing_and_stays_empty(lake: Lake) -> None:
    with pytest.raises(LakeMissing, match=r"lake not found at .*: run `entitlements consume`"):
        require_data(lake)
    assert list(Path(lake.base).iterdir()) == []


def test_tables_created_but_never_written_are_an_empty_lake(lake: Lake) -> None:
    ensure_layout(lake, default_allow_list())
    with pytest.raises(LakeMissing, match=r"lake empty \(no commit of data yet\) at "):
        require_data(lake)


def test_a_lake_in_the_old_format_is_told_to_migrate(lake: Lake) -> None:
    old = Path(lake.path("changes/event_date=2026-01-01"))
    old.mkdir(parents=True)
    (old / "shard-1-000001.parquet").write_bytes(b"PAR1")
    with pytest.raises(LakeMissing, match="run `entitlements lake migrate`"):
        require_data(lake)


def test_an_instant_before_the_first_change_has_no_data(lake: Lake, history: TableSim) -> None:
    land(lake, history, flush_rows=50)
    first = min(e.created_at for e in history.events)
    with pytest.raises(NoDataAsOf, match=r"its first change is at ") as raised:
        require_as_of(lake, first - timedelta(seconds=1))
    assert raised.value.first == first


def test_the_first_change_comes_from_the_file_statistics(lake: Lake, history: TableSim) -> None:
    land(lake, history, flush_rows=50)
    changes = require_as_of(lake, min(e.created_at for e in history.events))
    assert first_change_at(changes) == min(e.created_at for e in history.events)


def test_a_lake_whose_storage_does_not_answer_names_it_and_its_endpoint_not_its_keys() -> None:
    lake = open_lake(
        "s3://no-bucket/lake",
        endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        access_key="AKIDEXAMPLE",
        secret_key="not-to-be-shown",
    )
    with pytest.raises(LakeUnreachable) as raised:
        require_data(lake)
    text = str(raised.value)
    assert "s3://no-bucket/lake on the S3 endpoint http://127.0.0.1:9" in text
    assert "AKIDEXAMPLE" not in text and "not-to-be-shown" not in text

"""Polars reads the lake's Delta tables directly (no DuckDB, no views) and gives the same duplicate-Active
answer as the DuckDB audit: dedupe on (stream, shard, sequence number), the latest version of each item,
the erasure mask applied."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analytics import AnalyticsLakeEraser
from analytics.lake import CHANGES, Lake, open_lake
from analytics.lake._delta import _options
from analytics.lake._mask import read_mask
from analytics.lake.views import SQL_DIR, connect
from tests.analytics.audits.story import Story, clean_story

AUDIT = SQL_DIR / "audits" / "duplicate_active_rows.sql"


def _story() -> Story:
    story = clean_story()
    for user, accounts in (("mallory", ("acct-m1", "acct-m2")), ("trudy", ("acct-t1", "acct-t2", "acct-t3"))):
        for account in accounts:
            story.signup(user, account)
            story.tick(minutes=5)
    story.signup("erin", "acct-e1")  # erased below: her two Active rows must not be reported
    story.tick(minutes=5)
    story.signup("erin", "acct-e2")
    return story


def _duckdb_answer(lake: Lake) -> set[tuple[str, str]]:
    audit = AUDIT.read_text().rstrip().rstrip(";")
    return set(connect(lake).execute(f"SELECT user_id, sk FROM (\n{audit}\n)").fetchall())


def _polars_answer(lake: Lake) -> set[tuple[str, str]]:
    masked = list(read_mask(lake))
    changes = pl.scan_delta(lake.table_uri(CHANGES), storage_options=_options(lake))
    latest = (
        changes.filter(~pl.col("user_id").is_in(masked))
        .unique(subset=["stream_arn", "shard_id", "sequence_number"], keep="any")
        .sort(["pk", "sk", "sequence_key", "stream_arn", "shard_id"])
        .group_by(["pk", "sk"])
        .last()
        .filter((pl.col("change_kind") != "REMOVE") & (pl.col("item_kind") == "entitlement"))
        .with_columns(
            status=pl.when(pl.col("has_new_image")).then(pl.col("new_status")).otherwise(pl.col("old_status"))
        )
    )
    active = latest.filter(pl.col("status") == "Active")
    duplicated = active.group_by("user_id").len().filter(pl.col("len") > 1).select("user_id")
    found = active.join(duplicated, on="user_id").select("user_id", "sk").collect()
    return set(found.iter_rows())


def test_polars_on_the_delta_tables_finds_the_duplicate_active_rows_duckdb_does(
    tmp_path: Path,
) -> None:
    story = _story()
    lake = open_lake(str(tmp_path / "lake"))
    story.land(lake, flush_rows=7)
    story.land(lake, flush_rows=11)  # a replay with other batch boundaries: every event is there twice
    AnalyticsLakeEraser(lake).mask(["erin"])
    answer = _polars_answer(lake)
    assert answer == _duckdb_answer(lake)
    assert {user for user, _ in answer} == {"mallory", "trudy"}
    assert len(answer) == 5

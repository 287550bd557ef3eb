"""analytics/lake/history_start.py: a bootstrapped lake keeps the instant its history starts (T) in the
changes table's Delta metadata, and every as-of read before it is refused in one line."""

from __future__ import annotations

from datetime import timedelta

import pytest
from deltalake import DeltaTable

from analytics.lake import CHANGES, Lake, NoDataAsOf, default_allow_list, require_as_of
from analytics.lake.compaction import compact
from analytics.lake.history_start import (
    HISTORY_START,
    HistoryStartsLater,
    history_start,
    record_history_start,
)
from analytics.lake.purge import purge_users
from analytics.lake.snapshots import state_as_of
from analytics.lake.views import connect
from tests.analytics.lakesim import TableSim, land


def _changes(lake: Lake) -> DeltaTable:
    return DeltaTable(lake.table_uri(CHANGES))


def test_a_lake_never_bootstrapped_has_no_history_start(lake: Lake, history: TableSim) -> None:
    land(lake, history, flush_rows=50)
    assert history_start(_changes(lake)) is None


def test_the_start_is_kept_in_the_changes_tables_delta_configuration(lake: Lake, history: TableSim) -> None:
    land(lake, history, flush_rows=50)
    at = history.events[len(history.events) // 2].created_at
    kept = record_history_start(lake, default_allow_list(), at)
    assert kept == at
    assert _changes(lake).metadata().configuration[HISTORY_START] == at.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert history_start(_changes(lake)) == at


def test_a_new_lake_gets_its_tables_and_the_start_before_any_row(lake: Lake, history: TableSim) -> None:
    at = history.start
    record_history_start(lake, default_allow_list(), at)
    assert history_start(_changes(lake)) == at


def test_a_later_bootstrap_keeps_the_earlier_start(lake: Lake, history: TableSim) -> None:
    land(lake, history, flush_rows=50)
    first = history.events[10].created_at
    record_history_start(lake, default_allow_list(), first)
    assert record_history_start(lake, default_allow_list(), first + timedelta(days=1)) == first
    assert history_start(_changes(lake)) == first


def test_an_earlier_bootstrap_moves_the_start_back(lake: Lake, history: TableSim) -> None:
    land(lake, history, flush_rows=50)
    later = history.events[20].created_at
    record_history_start(lake, default_allow_list(), later)
    earlier = history.events[10].created_at
    assert record_history_start(lake, default_allow_list(), earlier) == earlier


def test_an_as_of_before_the_start_is_refused_in_one_line_naming_the_start(
    lake: Lake, history: TableSim
) -> None:
    land(lake, history, flush_rows=50)
    at = history.events[len(history.events) // 2].created_at
    record_history_start(lake, default_allow_list(), at)
    with pytest.raises(HistoryStartsLater) as refused:
        require_as_of(lake, at - timedelta(seconds=1))
    text = str(refused.value)
    assert "\n" not in text
    assert f"history from {at.strftime('%Y-%m-%dT%H:%M:%S.000Z')} on (bootstrapped then)" in text
    assert isinstance(refused.value, NoDataAsOf)  # what callers of an as-of read already handle


def test_the_as_of_state_and_views_before_the_start_are_refused(lake: Lake, history: TableSim) -> None:
    land(lake, history, flush_rows=50)
    at = history.events[len(history.events) // 2].created_at
    record_history_start(lake, default_allow_list(), at)
    with pytest.raises(HistoryStartsLater):
        state_as_of(lake, at - timedelta(minutes=1))
    with pytest.raises(HistoryStartsLater):
        connect(lake, as_of=at - timedelta(minutes=1))


def test_an_as_of_at_the_start_reads(lake: Lake, history: TableSim) -> None:
    land(lake, history, flush_rows=50)
    at = history.events[len(history.events) // 2].created_at
    record_history_start(lake, default_allow_list(), at)
    assert require_as_of(lake, at).version() >= 1


def test_the_start_survives_an_erasures_purge_of_the_log(lake: Lake, history: TableSim) -> None:
    land(lake, history, flush_rows=50)
    at = history.events[len(history.events) // 2].created_at
    record_history_start(lake, default_allow_list(), at)
    user = next(iter(history.items.values()))["userId"]
    purge_users(lake, [user])
    assert history_start(_changes(lake)) == at


def test_the_start_survives_a_compaction(lake: Lake, history: TableSim) -> None:
    land(lake, history, flush_rows=5)  # many small files a compaction rewrites
    at = history.events[len(history.events) // 2].created_at
    record_history_start(lake, default_allow_list(), at)
    before = _changes(lake).version()
    compact(lake)
    assert _changes(lake).version() > before
    assert history_start(_changes(lake)) == at

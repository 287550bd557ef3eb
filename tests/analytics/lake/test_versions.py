"""analytics/lake/_versions.py: time travel to a version an erasure removed is one clear error naming the
version, the cause and the oldest version left; a version still in the log loads."""

from __future__ import annotations

from functools import partial

import pytest

from analytics.lake import Lake
from analytics.lake._delta import open_table
from analytics.lake._versions import VersionRemoved, oldest_version
from analytics.lake.purge import purge_users
from analytics.lake.snapshots import state_at_version
from schema.errors import TerminalError
from tests.analytics.lakesim import TableSim, land, replay, state_rows

_land = partial(land, flush_rows=40)


def test_a_version_an_erasure_removed_is_refused_naming_it_and_the_oldest_left(
    lake: Lake, history: TableSim
) -> None:
    _land(lake, history)
    purge_users(lake, ["u001"])
    with pytest.raises(VersionRemoved) as refused:
        state_at_version(lake, 1)
    oldest = oldest_version(lake, "changes")
    message = str(refused.value)
    assert isinstance(refused.value, TerminalError) and "\n" not in message and "u001" not in message
    assert message == (
        f"table changes of the lake at {lake.uri} has no version 1: an erasure or the log's retention "
        f"removed it; the oldest version still readable is {oldest}"
    )


def test_a_version_after_the_latest_is_refused_naming_the_latest(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    table = open_table(lake, "changes")
    assert table is not None
    with pytest.raises(VersionRemoved, match=f"its latest version is {table.version()}"):
        state_at_version(lake, table.version() + 5)


def test_the_oldest_version_left_after_an_erasure_still_loads(lake: Lake, history: TableSim) -> None:
    _land(lake, history)
    # An erasure of a user the table holds (one of nobody's leaves the log alone since the purge skips
    # a table with nothing to remove).
    purge_users(lake, ["u001"])
    oldest = oldest_version(lake, "changes")
    assert oldest is not None and oldest > 1
    assert state_rows(state_at_version(lake, oldest)) == replay(
        e for e in history.events if e.user_id != "u001"
    )

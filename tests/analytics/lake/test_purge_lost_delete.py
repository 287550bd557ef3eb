"""A purge's DELETE that loses to a concurrent commit, on a local lake and on moto's S3: delta-rs has
already written the DELETE's rewrite of each file it read (the file's other rows) when its conflict
check fails, so that rewrite stays under the table, referenced by no version. It holds only users outside
the purge's batch (the rewrite is the file less the batch's rows), and it looks like a commit in flight,
so it is kept `ORPHAN_AGE` and counted as holding them: a later purge of those users within the bound
leaves it (their erasure is not acknowledged yet), one past the bound deletes it.

This is what the S3 purge race (`test_purge_races_on_s3.py`) found in two CI runs before its check told
unreferenced files apart: purges of `erased-0`, then `erased-1` and `erased-2`, with the first purge's
DELETE lost once, end with exactly one file naming `erased-1` and `erased-2`, "2 traces under changes"."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from deltalake import DeltaTable

from analytics.lake import CHANGES, Lake
from analytics.lake.eraser import AnalyticsLakeEraser
from analytics.lake.purge import ORPHAN_AGE, purge_users
from tests.analytics.lake.test_purge_races_on_s3 import ERASED, _land_erased_users, _live_files

FIRST, OTHERS = ERASED[0], ERASED[1:]


@pytest.fixture
def lost_first_delete(monkeypatch: pytest.MonkeyPatch, any_lake: Lake) -> Iterator[list[int]]:
    """The next DELETE on the lake's `changes` loses to a metadata commit landing after it read the
    table (a maintenance leader moving the table to a deployment's cadence), as delta-rs itself would
    meet one; later DELETEs run undisturbed. Yields the versions each DELETE call read."""
    real = DeltaTable.delete
    read: list[int] = []

    def delete_racing_a_commit(table: DeltaTable, *args: Any, **kwargs: Any) -> Any:
        read.append(int(table.version()))
        if len(read) == 1:
            concurrent = DeltaTable(any_lake.table_uri(CHANGES), storage_options=_options(any_lake))
            concurrent.alter.set_table_properties({"delta.checkpointInterval": "50"})
        return real(table, *args, **kwargs)

    monkeypatch.setattr(DeltaTable, "delete", delete_racing_a_commit)
    yield read


def _options(lake: Lake) -> dict[str, str] | None:
    return dict(lake.storage_options) or None


def _holding(lake: Lake) -> dict[str, set[str]]:
    """Per erased user, the files of `changes` (lake-relative) the verifier finds naming them."""
    scan = AnalyticsLakeEraser(lake).traces_for(ERASED)[CHANGES]
    assert scan is not None
    return {user: set(paths) for user, paths in scan.holding.items()}


def test_a_lost_delete_leaves_a_rewrite_naming_only_users_outside_its_batch(
    any_lake: Lake, lost_first_delete: list[int]
) -> None:
    _land_erased_users(any_lake)
    purge_users(any_lake, [FIRST])
    holding = _holding(any_lake)
    live = _live_files(any_lake, CHANGES)
    # The log names them too (the newest checkpoint's statistics of the live rewrite): not erased yet.
    left = {path for path in holding[OTHERS[0]] - live if "/_delta_log/" not in path}
    # Two DELETE calls: the lost one and its redo, which committed; the batch's user rests nowhere.
    assert (len(lost_first_delete), FIRST in holding) == (2, False)
    # The other users: in the live rewrite, and in the lost one's rewrite, a data file no version names.
    assert holding[OTHERS[0]] == holding[OTHERS[1]]
    assert len(holding[OTHERS[0]] & live) == 1
    assert len(left) == 1


def test_a_purge_within_orphan_age_keeps_the_lost_rewrite_and_it_counts_as_holding_them(
    any_lake: Lake, lost_first_delete: list[int]
) -> None:
    _land_erased_users(any_lake)
    purge_users(any_lake, [FIRST])
    for user in OTHERS:
        purge_users(any_lake, [user])
    counts = purge_users(any_lake, ERASED)
    holding = _holding(any_lake)
    # One file, naming the two users the first purge's batch left: the race test's "2 traces".
    assert sum(len(paths) for paths in holding.values()) == 2
    assert set(holding) == set(OTHERS)
    assert len(set.union(*holding.values())) == 1
    assert not set.union(*holding.values()) & _live_files(any_lake, CHANGES)
    assert counts.orphans_removed[CHANGES] == 0
    assert all(AnalyticsLakeEraser(any_lake).holds(user) for user in OTHERS)


def test_a_purge_past_orphan_age_deletes_the_lost_rewrite_and_leaves_no_trace(
    any_lake: Lake, lost_first_delete: list[int]
) -> None:
    _land_erased_users(any_lake)
    purge_users(any_lake, [FIRST])
    later = datetime.now(UTC) + ORPHAN_AGE + timedelta(minutes=1)
    counts = purge_users(any_lake, ERASED, clock=lambda: later)
    assert (counts.orphans_removed[CHANGES], _holding(any_lake)) == (1, {})
    assert not any(AnalyticsLakeEraser(any_lake).holds(user) for user in ERASED)

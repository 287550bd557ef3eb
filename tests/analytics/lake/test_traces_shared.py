"""analytics/lake/eraser.py `traces_for`: concurrent verifiers share one scan of the lake, each answered
only by a scan that began after it asked, and only about its own users."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping

import pytest

from analytics import AnalyticsLakeEraser
from analytics.lake import Lake
from analytics.lake._traces import BatchTraces, scan_table_for
from analytics.lake.purge import PURGED_DATASETS
from tests.analytics.lakesim import TableSim, land


class _BlockedFirstScan:
    """`scan_table_for` whose first call waits for `release`; records each call's users."""

    def __init__(self) -> None:
        self.calls: list[frozenset[str]] = []
        self.first_running = threading.Event()
        self.release = threading.Event()

    def __call__(
        self, lake: Lake, name: str, user_ids: Collection[str], *, until: float | None = None
    ) -> BatchTraces:
        self.calls.append(frozenset(user_ids))
        if len(self.calls) == 1:
            self.first_running.set()
            self.release.wait(60)
        return scan_table_for(lake, name, user_ids, until=until)


def _wait_for_waiters(eraser: AnalyticsLakeEraser, count: int) -> None:
    while eraser._scans_waiting() < count:
        time.sleep(0.01)


def test_verifiers_asking_while_a_scan_runs_share_the_next_scan(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    land(lake, history, flush_rows=30)
    eraser = AnalyticsLakeEraser(lake)
    scans = _BlockedFirstScan()
    monkeypatch.setattr("analytics.lake.eraser.scan_table_for", scans)
    results: dict[str, Mapping[str, BatchTraces | None]] = {}

    def verify(user: str) -> None:
        results[user] = eraser.traces_for([user])

    threads = [threading.Thread(target=verify, args=(user,)) for user in ("u001", "u002", "u003")]
    threads[0].start()
    assert scans.first_running.wait(30)
    for thread in threads[1:]:
        thread.start()
    _wait_for_waiters(eraser, 2)
    scans.release.set()
    for thread in threads:
        thread.join(60)
    tables = len(PURGED_DATASETS)
    assert scans.calls == [frozenset({"u001"})] * tables + [frozenset({"u002", "u003"})] * tables


def test_a_shared_scan_answers_each_verifier_about_its_own_users_only(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    land(lake, history, flush_rows=30)
    eraser = AnalyticsLakeEraser(lake)
    scans = _BlockedFirstScan()
    monkeypatch.setattr("analytics.lake.eraser.scan_table_for", scans)
    results: dict[str, Mapping[str, BatchTraces | None]] = {}

    def verify(user: str) -> None:
        results[user] = eraser.traces_for([user])

    first = threading.Thread(target=verify, args=("u009",))
    first.start()
    assert scans.first_running.wait(30)
    later = [threading.Thread(target=verify, args=(user,)) for user in ("u002", "u003")]
    for thread in later:
        thread.start()
    _wait_for_waiters(eraser, 2)
    scans.release.set()
    for thread in [first, *later]:
        thread.join(60)
    changes = {user: results[user]["changes"] for user in ("u002", "u003")}
    assert {user: set(found.holding) if found else None for user, found in changes.items()} == {
        "u002": {"u002"},
        "u003": {"u003"},
    }


def test_a_verifier_whose_time_passes_while_another_scan_runs_gets_a_timeout(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    land(lake, history, flush_rows=30)
    eraser = AnalyticsLakeEraser(lake)
    scans = _BlockedFirstScan()
    monkeypatch.setattr("analytics.lake.eraser.scan_table_for", scans)
    first = threading.Thread(target=eraser.traces_for, args=(["u001"],))
    first.start()
    assert scans.first_running.wait(30)
    try:
        with pytest.raises(TimeoutError):
            eraser.traces_for(["u002"], until=time.monotonic() + 0.05)
    finally:
        scans.release.set()
        first.join(60)


def test_a_scan_that_began_before_the_verifier_asked_is_not_its_answer(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # u002 asks while a scan for u001 runs: that scan began before u002's own purge may have finished.
    land(lake, history, flush_rows=30)
    eraser = AnalyticsLakeEraser(lake)
    scans = _BlockedFirstScan()
    monkeypatch.setattr("analytics.lake.eraser.scan_table_for", scans)
    first = threading.Thread(target=eraser.traces_for, args=(["u001", "u002"],))
    first.start()
    assert scans.first_running.wait(30)
    second: list[Mapping[str, BatchTraces | None]] = []
    thread = threading.Thread(target=lambda: second.append(eraser.traces_for(["u002"])))
    thread.start()
    _wait_for_waiters(eraser, 1)
    scans.release.set()
    for running in (first, thread):
        running.join(60)
    assert (len(second), scans.calls.count(frozenset({"u002"}))) == (1, len(PURGED_DATASETS))

"""analytics/lake/eraser.py `traces_for`: concurrent verifiers share one scan of the lake, each answered
only by a scan that began after it asked, and only about its own users."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping, Sequence

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


Answer = Mapping[str, BatchTraces | None] | Exception


def _verify_while_a_scan_runs(
    lake: Lake,
    history: TableSim,
    monkeypatch: pytest.MonkeyPatch,
    first: Collection[str],
    later: Sequence[Collection[str]],
    *,
    patience: float | None = None,
) -> tuple[list[frozenset[str]], list[Answer]]:
    """The history landed, a verifier for `first` starts the eraser's first scan, which is held; one
    verifier per entry of `later` asks on its own thread meanwhile (each with `until` `patience` seconds
    on, if given), and the scan is released once every one of them waits for it (or has already
    stopped). Returns the scans made (their users, one per table) and each later verifier's answer or
    error, in the order of `later`."""
    land(lake, history, flush_rows=30)
    eraser = AnalyticsLakeEraser(lake)
    scans = _BlockedFirstScan()
    monkeypatch.setattr("analytics.lake.eraser.scan_table_for", scans)
    answers: dict[int, Answer] = {}

    def verify(index: int, users: Collection[str]) -> None:
        until = None if patience is None else time.monotonic() + patience
        try:
            answers[index] = eraser.traces_for(users, until=until)
        except Exception as error:  # kept as its answer: a test asserts which error it was
            answers[index] = error

    opener = threading.Thread(target=eraser.traces_for, args=(first,))
    opener.start()
    threads = [threading.Thread(target=verify, args=(i, users)) for i, users in enumerate(later)]
    try:
        assert scans.first_running.wait(30)
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30  # a guard against a hang, not a measure
        while eraser._scans_waiting() + len(answers) < len(later):
            assert time.monotonic() < deadline, "the later verifiers never waited for the running scan"
            time.sleep(0.01)
    finally:
        scans.release.set()
        for thread in [opener, *threads]:
            if thread.ident is not None:  # started
                thread.join(60)
    assert sorted(answers) == list(range(len(later))), "a later verifier never answered"
    return scans.calls, [answers[i] for i in range(len(later))]


def test_verifiers_asking_while_a_scan_runs_share_the_next_scan(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, _ = _verify_while_a_scan_runs(lake, history, monkeypatch, ["u001"], [["u002"], ["u003"]])
    tables = len(PURGED_DATASETS)
    assert calls == [frozenset({"u001"})] * tables + [frozenset({"u002", "u003"})] * tables


def test_a_shared_scan_answers_each_verifier_about_its_own_users_only(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, answers = _verify_while_a_scan_runs(lake, history, monkeypatch, ["u009"], [["u002"], ["u003"]])
    holding: dict[str, set[str] | None] = {}
    for user, answer in zip(("u002", "u003"), answers, strict=True):
        assert not isinstance(answer, Exception)
        found = answer["changes"]
        holding[user] = set(found.holding) if found else None
    assert holding == {"u002": {"u002"}, "u003": {"u003"}}


def test_a_verifier_whose_time_passes_while_another_scan_runs_gets_a_timeout(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, answers = _verify_while_a_scan_runs(lake, history, monkeypatch, ["u001"], [["u002"]], patience=0.05)
    assert [type(answer) for answer in answers] == [TimeoutError]


def test_a_scan_that_began_before_the_verifier_asked_is_not_its_answer(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # u002 asks while a scan for u001 runs: that scan began before u002's own purge may have finished.
    calls, answers = _verify_while_a_scan_runs(lake, history, monkeypatch, ["u001", "u002"], [["u002"]])
    assert not isinstance(answers[0], Exception)
    assert calls.count(frozenset({"u002"})) == len(PURGED_DATASETS)

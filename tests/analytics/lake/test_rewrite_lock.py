"""analytics/lake/_rewrite_lock.py: purges, compactions and snapshots of one lake run one at a time."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from analytics.lake import Lake, compact, purge_users, snapshot, snapshot_as_of
from analytics.lake._rewrite_lock import LOCK_FILE_NAME, rewrite_lock
from tests.analytics.lakesim import TableSim

WAIT = 0.5  # long enough for an unblocked rewrite of an empty lake to finish many times over

REWRITES: dict[str, Callable[[Lake], object]] = {
    "purge": lambda lake: purge_users(lake, ["u001"]),
    "compaction": compact,
    "snapshot": snapshot,
    "as-of snapshot": lambda lake: snapshot_as_of(lake, TableSim(seed=0).now),
}


def _started(rewrite: Callable[[Lake], object], lake: Lake) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()

    def run() -> None:
        rewrite(lake)
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


@pytest.mark.parametrize("name", REWRITES)
def test_a_rewrite_waits_while_another_thread_holds_the_lock(name: str, lake: Lake) -> None:
    with rewrite_lock(lake):
        thread, done = _started(REWRITES[name], lake)
        assert not done.wait(WAIT)

    thread.join(timeout=60)
    assert done.is_set()


def test_a_rewrite_waits_while_another_process_holds_the_lock(lake: Lake) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from filelock import FileLock; lock = FileLock(sys.argv[1]); lock.acquire(); "
            "print('held', flush=True); sys.stdin.read()",
            lake.path(LOCK_FILE_NAME),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        thread, done = _started(compact, lake)
        assert not done.wait(WAIT)
    finally:
        holder.communicate(input="", timeout=30)  # the holder exits: its lock goes with it

    thread.join(timeout=60)
    assert done.is_set()


def test_a_rewrite_called_inside_another_on_the_same_thread_goes_ahead(lake: Lake) -> None:
    def nested(lake: Lake) -> None:
        with rewrite_lock(lake):
            compact(lake)

    thread, done = _started(nested, lake)

    thread.join(timeout=60)
    assert done.is_set()

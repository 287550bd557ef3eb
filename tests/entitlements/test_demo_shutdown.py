"""entitlements/_demo.py: nothing the demo started may still run when its report is read."""

from __future__ import annotations

import subprocess
import sys
import threading

from entitlements._demo import _live_processes_in_group, _still_running


def test_a_thread_that_ends_within_its_grace_is_not_named() -> None:
    before = set(threading.enumerate())
    threading.Timer(0.2, lambda: None).start()
    assert _still_running(before) == []


def test_a_thread_still_running_after_its_grace_is_named() -> None:
    before = set(threading.enumerate())
    release = threading.Event()
    threading.Thread(target=release.wait, args=(30,), name="stuck", daemon=True).start()
    try:
        assert _still_running(before) == ["stuck"]
    finally:
        release.set()


def test_a_process_group_counts_its_live_processes_until_they_end() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        alive = _live_processes_in_group(child.pid)
    finally:
        child.kill()
        child.wait()
    assert (alive, _live_processes_in_group(child.pid)) == (1, 0)

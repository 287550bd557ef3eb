"""bench/_report.py: a bench's threads, one of which failing ends the bench with a non-zero exit."""

from __future__ import annotations

import threading

import psutil
import pytest

from bench._report import BenchThreads, Comparison, burners, print_figures


def _fail() -> None:
    raise RuntimeError("Invalid table version: 2")


def test_a_failed_thread_ends_the_bench_with_exit_status_1_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    threads = BenchThreads()
    threads.start("landing", _fail).join()
    threads.start("answers", lambda: None).join()
    assert threads.failed == ["landing"]
    with pytest.raises(SystemExit) as ended:
        threads.check()
    assert ended.value.code == 1
    assert "bench thread 'landing' failed: RuntimeError" in capsys.readouterr().err


def test_threads_that_all_return_let_the_bench_go_on() -> None:
    threads = BenchThreads()
    seen: list[int] = []
    threads.start("worker", seen.append, 1).join()
    threads.check()
    assert seen == [1] and threads.failed == []


def test_a_thread_still_running_when_joined_counts_as_failed() -> None:
    threads = BenchThreads()
    release = threading.Event()
    thread = threads.start("erasure worker", release.wait)
    assert threads.join(thread, timeout=0.05) is False
    release.set()
    thread.join()
    assert threads.failed == ["erasure worker"]
    with pytest.raises(SystemExit):
        threads.check()


def test_burners_run_busy_processes_for_the_block_and_end_with_it() -> None:
    # Only the block's new children: the test process may have others (a run's shared moto server).
    before = {child.pid for child in psutil.Process().children()}
    with burners(2) as count:
        children = [child for child in psutil.Process().children() if child.pid not in before]
        assert (count, len(children)) == (2, 2)
    assert not any(child.is_running() and child.status() != psutil.STATUS_ZOMBIE for child in children)


def test_a_figure_without_a_target_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    print_figures("t", [Comparison("x", 2.0, "s", "y", 1.0)])
    assert "(no target)" in capsys.readouterr().out

"""bench/bench_lake_commits.py: a writer process that fails ends the bench with exit status 1, naming it;
writers that all finish report their commits."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from analytics.lake import default_allow_list, open_lake
from analytics.lake._files import ensure_layout
from bench.bench_lake_commits import BenchProcesses


def test_a_writer_process_that_fails_ends_the_bench_with_exit_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    processes = BenchProcesses()
    # No table at that root: the writer's first step fails in its own process.
    processes.start(("http://127.0.0.1:9", str(tmp_path / "no-lake"), 0, time.time(), 0.1))
    with pytest.raises(SystemExit) as ended:
        processes.results(timeout=120)
    assert ended.value.code == 1
    assert "bench writer failed: writer 0" in capsys.readouterr().err


def test_writer_processes_that_all_finish_report_their_commits(tmp_path: Path) -> None:
    root = str(tmp_path / "lake")
    ensure_layout(open_lake(root), default_allow_list())
    processes = BenchProcesses()
    for index in range(2):
        processes.start(("http://127.0.0.1:9", root, index, time.time(), 0.5))
    reports = processes.results(timeout=120)
    assert [index for index, _, _ in reports] == [0, 1]
    assert all(commits >= 1 and rows == commits * 500 for _, commits, rows in reports)

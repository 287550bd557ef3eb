"""The rework run (bench/bench_cleanup.py's "rework"): 11 seeded kills of a process running the cleanup
handler's flushes, half during a flush and half after one before its outcomes reached the lake, with
Array failing and timing out. Specified: a DELETE is repeated only for a request a kill cut off between
Array's answer and its final note, no account has two final outcomes, and nothing is lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.bench_cleanup import run_rework


@pytest.mark.timeout(300)
def test_a_kill_run_with_array_faults_repeats_no_finished_delete_and_records_one_final_outcome_each(
    moto_endpoint: str, tmp_path: Path
) -> None:
    counts = run_rework(moto_endpoint, tmp_path)
    assert counts.kills == 11
    assert counts.repeated <= counts.in_flight_at_kills
    assert counts.two_finals == 0
    assert counts.left_at_array == 0

"""telemetry/_presence.py: whether `entitlements consume` holds a state folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from telemetry import ConsumerPresence
from telemetry._presence import ConsumerAlreadyRunning
from tests.telemetry._holder import holding


def test_a_second_consumer_on_a_held_state_folder_is_refused_naming_the_folder(tmp_path: Path) -> None:
    with holding(tmp_path), pytest.raises(ConsumerAlreadyRunning, match=str(tmp_path)):
        ConsumerPresence(tmp_path).claim(worker_id="worker-2", metrics_url=None)


def test_a_held_folder_is_reported_running_with_the_holders_pid(tmp_path: Path) -> None:
    with holding(tmp_path) as holder:
        report = ConsumerPresence(tmp_path).report()
    assert (report.running, report.pid, report.worker_id) == (True, holder.pid, "worker-1")


def test_a_holder_that_ended_without_releasing_leaves_the_folder_not_running(tmp_path: Path) -> None:
    with holding(tmp_path):
        pass
    assert ConsumerPresence(tmp_path).report().running is False


def test_a_released_folder_reports_when_the_consumer_stopped(tmp_path: Path) -> None:
    presence = ConsumerPresence(tmp_path)
    presence.claim(worker_id="worker-1", metrics_url="http://127.0.0.1:9180/metrics")
    presence.release()
    report = ConsumerPresence(tmp_path).report()
    assert (report.running, report.metrics_url) == (False, "http://127.0.0.1:9180/metrics")
    assert report.stopped_at is not None

"""`entitlements consume` runs the lake's maintenance (analytics/lake/maintenance.py) beside the daemon:
its runner takes the lake's lease under the worker's own owner while the daemon runs, and gives it up
when consume stops; `ENTITLEMENTS_LAKE__MAINTENANCE_ENABLED=false` runs none."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from analytics import lake_from_settings
from analytics.lake._delta import open_table
from analytics.lake.maintenance import MAINTENANCE_TABLE, Lease, MaintenanceRunner, stable_owner
from config import Settings, load_settings
from entitlements import compose
from entitlements.commands import consume as command

_WORKER = "host-a-0123456789ab"


class _IdleDaemon:
    """Stands for the KCL daemon: the test is about what consume runs beside it."""

    def __init__(self, spec: object) -> None:
        self.starts = 0
        self.stopped_with: int | None = 0
        self.running = False


def _lease(settings: Settings) -> Lease | None:
    table = open_table(lake_from_settings(settings), MAINTENANCE_TABLE)
    return None if table is None else MaintenanceRunner.read_lease(table)


def _settings(tmp_path: Path, **lake: object) -> Settings:
    return load_settings(
        environ={},
        consumer={"state_dir": tmp_path / "state"},
        lake={"root": str(tmp_path / "lake"), "maintenance_check_seconds": 0.2, **lake},
    )


def _consume(
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    seen: list[Lease | None],
    *,
    wait_seconds: float = 60.0,
) -> None:
    """Run consume's supervision with the daemon standing idle; while it "runs", wait (up to
    `wait_seconds`) for a lease in the lake, note what is there, then stop."""
    import pipeline.daemon  # noqa: PLC0415
    import pipeline.lease_watch  # noqa: PLC0415

    def supervise(daemon: object, stop: threading.Event, **kwargs: Any) -> None:
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline and _lease(settings) is None:
            time.sleep(0.1)
        seen.append(_lease(settings))
        stop.set()

    monkeypatch.setattr(command, "_CountedDaemon", _IdleDaemon)
    monkeypatch.setattr(compose, "lease_table_client", lambda settings: None)
    monkeypatch.setattr(pipeline.lease_watch, "watch_leases", lambda *args, **kwargs: None)
    monkeypatch.setattr(pipeline.daemon, "supervise", supervise)
    command._supervise_with_metrics(settings, object(), _WORKER, threading.Event())  # type: ignore[arg-type]


def test_consume_runs_the_lake_maintenance_under_its_worker_and_gives_the_lease_up_when_it_stops(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = _settings(tmp_path)
    seen: list[Lease | None] = []
    started = time.time()

    _consume(monkeypatch, settings, seen)

    assert seen and seen[0] is not None
    assert seen[0].owner == stable_owner(_WORKER)
    assert seen[0].lease_until > started  # held while the daemon ran
    after = _lease(settings)
    assert after is not None and after.owner == stable_owner(_WORKER)
    assert after.lease_until <= time.time()  # given up at the stop: the next runner takes it at once


def test_consume_with_maintenance_disabled_runs_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = _settings(tmp_path, maintenance_enabled=False)
    built: list[object] = []
    build = compose.lake_maintenance

    def spied(settings: Settings, **kwargs: Any) -> threading.Thread | None:
        built.append(build(settings, **kwargs))
        return built[-1]  # type: ignore[return-value]

    monkeypatch.setattr(compose, "lake_maintenance", spied)

    _consume(monkeypatch, settings, [], wait_seconds=2.0)

    assert built == [None]
    assert _lease(settings) is None  # no lease table: nothing looked at the lake

"""pipeline/daemon.py: the launcher JVM's spec, built from the settings (no JVM started here)."""

from __future__ import annotations

import os
from pathlib import Path

from config import load_settings
from pipeline.daemon import DaemonSpec

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/entitlements/stream/2026-01-01T00:00:00.000"


def _mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


def test_the_work_folder_and_the_launcher_properties_are_owner_only(tmp_path: Path) -> None:
    settings = load_settings(consumer={"state_dir": tmp_path / "state"})
    spec = DaemonSpec.from_settings(
        settings, stream_arn=STREAM, worker_id="w1", work_dir=tmp_path / "state" / "daemon"
    )
    assert (_mode(tmp_path / "state"), _mode(spec.properties_path.parent), _mode(spec.properties_path)) == (
        0o700,
        0o700,
        0o600,
    )

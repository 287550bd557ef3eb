"""pipeline/launcher's StreamsMultiLangLauncher: what it writes on its stderr itself, which is the log
stream `consume` shares with the children: one JSON line when it cannot run, never a raw trace."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
JAR = REPO / "pipeline" / "launcher" / "target" / "entitlements-kcl-launcher.jar"

pytestmark = pytest.mark.skipif(not JAR.exists(), reason="the launcher is not built (make setup)")


def _launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", "-jar", str(JAR), *args],
        env={**os.environ, "KCL_LOG_FILE": str(tmp_path / "kcl.log")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_launcher_that_cannot_read_its_properties_says_so_in_one_json_line_naming_the_class(
    tmp_path: Path,
) -> None:
    done = _launch(tmp_path, str(tmp_path / "missing.properties"))
    [line] = done.stderr.splitlines()
    entry = json.loads(line)
    assert (done.returncode, entry["level"], entry["exception"], "missing.properties" in line) == (
        1,
        "ERROR",
        "java.nio.file.NoSuchFileException",
        False,
    )


def test_a_launcher_started_without_its_properties_file_says_its_usage_in_one_json_line(
    tmp_path: Path,
) -> None:
    done = _launch(tmp_path)
    [line] = done.stderr.splitlines()
    assert (done.returncode, json.loads(line)["msg"]) == (
        2,
        "usage: entitlements-kcl-launcher <launcher.properties>",
    )

"""entitlements/cli.py: the console script's shell around the commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CANARY = "canary-7f3a-secret-value"
REPO = Path(__file__).resolve().parents[2]


def test_a_refused_setting_ends_a_command_with_its_field_and_rule_never_the_value() -> None:
    environ = {**os.environ, "ENTITLEMENTS_CONSUMER__COMMIT_EVERY_RECORDS": CANARY}
    done = subprocess.run(
        [sys.executable, "-c", "from entitlements.cli import main; main()", "consumer-status"],
        cwd=REPO,
        env=environ,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert b"ENTITLEMENTS_CONSUMER__COMMIT_EVERY_RECORDS: int_parsing" in done.stderr
    assert CANARY.encode() not in done.stderr + done.stdout

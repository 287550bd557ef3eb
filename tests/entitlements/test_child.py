"""entitlements/child.py: the KCL child's main() (settings -> compose -> kclpy), without the daemon."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CANARY = "canary-7f3a-secret-value"
REPO = Path(__file__).resolve().parents[2]


def _run_child(environ: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """The child started as the daemon starts it, with nothing on its stdin."""
    return subprocess.run(
        [sys.executable, "-m", "entitlements.child"],
        cwd=REPO,
        env=environ,
        input=b"",
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_a_mistyped_secret_stops_the_child_with_the_field_and_never_the_value() -> None:
    environ = {**os.environ, "ENTITLEMENTS_ARRAY__TIMEOUT_SECONDS": CANARY}
    done = _run_child(environ)
    assert (done.returncode, done.stdout) == (2, b"")
    assert b"ENTITLEMENTS_ARRAY__TIMEOUT_SECONDS: float_parsing" in done.stderr
    assert CANARY.encode() not in done.stderr


def test_the_child_loads_no_cli_module_at_run_time() -> None:
    prefixes = ("entitlements.commands", "entitlements.cli", "typer")
    probe = (
        f"import sys, entitlements.child; print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, timeout=120, check=True
    )
    assert done.stdout.strip() == b"[]"


def test_a_child_whose_retry_queue_is_missing_stops_naming_the_setup_command(
    moto_endpoint: str, tmp_path: Path
) -> None:
    environ = {
        **os.environ,
        "ENTITLEMENTS_AWS__ENDPOINT_URL": moto_endpoint,
        # A region no other test uses: moto keeps queues per region, so no retry queue exists there.
        "ENTITLEMENTS_AWS__REGION": "ap-southeast-2",
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": "testing",
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": "testing",
        "ENTITLEMENTS_CONSUMER__STREAM_ARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/x",
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state"),
    }
    done = _run_child(environ)
    assert (done.returncode, done.stdout) == (2, b"")
    assert b"run `entitlements cleanup setup` first" in done.stderr

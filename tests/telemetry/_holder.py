"""Another process holding a state folder as `entitlements consume` does, until its stdin closes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HOLD = """
import sys
from pathlib import Path
from telemetry import ConsumerPresence
presence = ConsumerPresence(Path(sys.argv[1]))  # held while this process lives
presence.claim(worker_id="worker-1", metrics_url=None)
print("claimed", flush=True)
sys.stdin.read()
"""


@contextmanager
def holding(state_dir: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(state_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "claimed\n"
        yield process
    finally:
        process.communicate(timeout=30)

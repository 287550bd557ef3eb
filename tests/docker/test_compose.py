"""The compose file is accepted by Debian's docker-compose (no Docker engine runs here to start it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

COMPOSE = Path(__file__).resolve().parents[2] / "docker" / "compose.yaml"


def test_docker_compose_accepts_the_compose_file() -> None:
    assert shutil.which("docker-compose"), "docker-compose missing: run scripts/install_debian_tools.sh"
    result = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config", "--services"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == {"localstack", "consumer", "cleanup-retry-worker", "erasure-worker"}


def test_every_service_but_the_stack_shares_its_loopback() -> None:
    result = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config"], capture_output=True, text=True, check=True
    )
    assert result.stdout.count("network_mode: service:localstack") == 3

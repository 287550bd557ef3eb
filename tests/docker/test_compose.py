"""The compose file is accepted by Debian's docker-compose (no Docker engine runs here to start it), and
every image installs the project the one way the tests install it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

DOCKER = Path(__file__).resolve().parents[2] / "docker"
COMPOSE = DOCKER / "compose.yaml"


def test_docker_compose_accepts_the_compose_file() -> None:
    assert shutil.which("docker-compose"), "docker-compose missing: run scripts/install_debian_tools.sh"
    result = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config", "--services"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == {
        "localstack",
        "cleanup-setup",
        "erasure-setup",
        "consumer",
        "cleanup-retry-worker",
        "erasure-worker",
    }


def test_every_service_but_the_stack_shares_its_loopback() -> None:
    result = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config"], capture_output=True, text=True, check=True
    )
    assert result.stdout.count("network_mode: service:localstack") == 5


def test_every_image_installs_the_project_with_the_install_script_the_tests_run() -> None:
    for dockerfile in sorted(DOCKER.glob("*.Dockerfile")):
        installs = re.findall(r"^RUN .*|^ && .*", dockerfile.read_text(), flags=re.MULTILINE)
        assert any("scripts/install.py" in line for line in installs), dockerfile.name
        assert not any("pip install" in line for line in installs), dockerfile.name

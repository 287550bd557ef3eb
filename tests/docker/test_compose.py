"""The compose file is accepted by Debian's docker-compose (no Docker engine runs here to start it), and
every image installs the project the one way the tests install it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from config import MetricsSettings, load_settings
from tests.docker.compose_services import compose_config

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


# Each long-running service and the setting naming its Prometheus port (docs/operations/metrics.md).
METRICS_PORTS = {
    "localstack": "service_port",
    "consumer": "consume_port",
    "cleanup-retry-worker": "retry_worker_port",
    "erasure-worker": "erasure_worker_port",
}


def metrics_settings(service: dict[str, Any], patch: pytest.MonkeyPatch) -> MetricsSettings:
    """The metrics settings the service's command builds from its compose environment."""
    for name, value in service.get("environment", {}).items():
        patch.setenv(name, str(value))
    return load_settings().metrics


def test_the_long_running_services_are_the_ones_that_do_not_exit() -> None:
    services = compose_config()["services"]
    assert {name for name, s in services.items() if s.get("restart") != "no"} == set(METRICS_PORTS)


def test_each_long_running_service_serves_prometheus_on_a_loopback_port_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services = compose_config()["services"]
    ports: dict[str, int | None] = {}
    for name, setting in METRICS_PORTS.items():
        with monkeypatch.context() as patch:
            metrics = metrics_settings(services[name], patch)
        assert metrics.host == "127.0.0.1", name
        ports[name] = getattr(metrics, setting)
    assert None not in ports.values() and len(set(ports.values())) == len(ports)
    assert not set(ports.values()) & {4566, 8765, 8766, 8780}  # the stack's, the fakes' and the service's


def test_each_long_running_service_appends_its_emf_documents_to_a_file_in_a_volume(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services = compose_config()["services"]
    for name in METRICS_PORTS:
        with monkeypatch.context() as patch:
            sink = metrics_settings(services[name], patch).emf_file
        mounts = [str(volume).split(":")[1] for volume in services[name].get("volumes", [])]
        assert sink is not None and any(str(sink).startswith(mount + "/") for mount in mounts), name

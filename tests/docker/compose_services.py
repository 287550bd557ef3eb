"""Running docker/compose.yaml's services without a container engine: each service's command from one
environment the images' install script made, as the images' ENTRYPOINT (`entitlements`) would run it.

What stands in for each part of a container:
- its image: the install's virtual environment (the images install into /opt/entitlements);
- its file system: a folder of its own (its working folder and home, where any relative path lands);
  a named volume is one folder shared by every service that mounts it;
- its network: the services share one namespace's loopback in the compose file; here they share the
  host's, each fixed port (in a loopback URL, after a `--...port` option, or the value of a `*_PORT`
  variable such as the metrics endpoints') moved to a free one so that nothing else on the machine
  collides with them;
- `depends_on`: a service starts once each dependency is healthy (its healthcheck command passes),
  has exited 0 (`service_completed_successfully`), or has started.
"""

from __future__ import annotations

__all__ = ["ComposeRun", "compose_config", "timed_install"]

import contextlib
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from pathlib import Path
from typing import IO, Any, TypeVar

import yaml  # type: ignore[import-untyped]  # (PyYAML, moto's dependency, ships no stubs)

from tests.support.polling import wait_for

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker" / "compose.yaml"
# Where the images install the project (scripts/install.py into a virtual environment there).
IMAGE_PREFIX = "/opt/entitlements"
T = TypeVar("T")
_LOOPBACK_PORT = re.compile(r"(?<=127\.0\.0\.1:)(\d+)")


def compose_config() -> dict[str, Any]:
    """The compose file as docker-compose resolves it (anchors merged, defaults filled)."""
    result = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE_FILE), "config"], capture_output=True, text=True, check=True
    )
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _fixed_ports(services: Mapping[str, Any]) -> set[int]:
    """Every loopback port the services name: in URLs (environment, healthchecks) and after a
    `--...port` option of a command."""
    ports: set[int] = set()
    for service in services.values():
        texts = [*service.get("environment", {}).values(), *service.get("healthcheck", {}).get("test", [])]
        ports.update(int(port) for text in texts for port in _LOOPBACK_PORT.findall(str(text)))
        environment = service.get("environment", {})
        ports.update(int(value) for key, value in environment.items() if _is_port_variable(key, value))
        command = service.get("command", [])
        ports.update(int(value) for option, value in itertools.pairwise(command) if option.endswith("port"))
    return ports


def _is_port_variable(key: str, value: object) -> bool:
    """A variable holding a bare port (ENTITLEMENTS_METRICS__CONSUME_PORT: "9180")."""
    return key.endswith("_PORT") and str(value).isdigit()


@dataclass
class _Started:
    process: subprocess.Popen[bytes]
    log: Path
    handle: IO[bytes]


@dataclass
class ComposeRun:
    """The compose file's services, run from `prefix` (an install) with their folders under `root`."""

    prefix: Path
    root: Path
    config: dict[str, Any] = field(default_factory=compose_config)
    started: dict[str, _Started] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ports = {port: _free_port() for port in _fixed_ports(self.services)}

    @property
    def services(self) -> dict[str, Any]:
        services: dict[str, Any] = self.config["services"]
        return services

    def order(self) -> list[str]:
        """The services in dependency order (compose's: a service after everything it depends on)."""
        graph = {name: set(service.get("depends_on", {})) for name, service in self.services.items()}
        return list(TopologicalSorter(graph).static_order())

    # -- what a container would see --------------------------------------------------------------

    def _mounts(self, name: str) -> list[tuple[str, Path]]:
        """(path in the container, folder here), the longest first."""
        mounts = [(IMAGE_PREFIX, self.prefix)]
        for volume in self.services[name].get("volumes", []):
            source, target = str(volume).split(":")[:2]
            mounts.append((target, self.root / "volumes" / source))
        return sorted(mounts, key=lambda mount: -len(mount[0]))

    def _container_root(self, name: str) -> Path:
        return self.root / "containers" / name

    def host_path(self, name: str, path: str) -> Path:
        """Where a container path of service `name` is here."""
        for target, folder in self._mounts(name):
            if path == target or path.startswith(target + "/"):
                return folder / path[len(target) :].lstrip("/")
        return self._container_root(name) / path.lstrip("/")

    def _text(self, name: str, text: str) -> str:
        text = _LOOPBACK_PORT.sub(lambda port: str(self.ports.get(int(port[0]), port[0])), text)
        return str(self.host_path(name, text)) if text.startswith("/") else text

    def _variable(self, name: str, key: str, value: str) -> str:
        if _is_port_variable(key, value):
            return str(self.ports.get(int(value), value))
        return self._text(name, value)

    def environment(self, name: str) -> dict[str, str]:
        """The service's compose environment (paths and ports moved), with the image's PATH and a home."""
        home = self._container_root(name) / "home"
        home.mkdir(parents=True, exist_ok=True)
        compose_env = self.services[name].get("environment", {})
        return {
            "PATH": f"{self.prefix / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin",
            "HOME": str(home),
            **{key: self._variable(name, key, str(value)) for key, value in compose_env.items()},
        }

    def command(self, name: str) -> list[str]:
        command = [str(part) for part in self.services[name].get("command", [])]
        moved = [
            str(self.ports.get(int(value), value)) if option.endswith("port") and value.isdigit() else value
            for option, value in itertools.pairwise(["", *command])
        ]
        return [str(self.prefix / "bin" / "entitlements"), *(self._text(name, part) for part in moved)]

    # -- running ---------------------------------------------------------------------------------

    def start(self, name: str) -> None:
        for folder in {*(folder for _, folder in self._mounts(name)), self._container_root(name)}:
            folder.mkdir(parents=True, exist_ok=True)
        log = self.root / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = log.open("wb")
        process = subprocess.Popen(
            self.command(name),
            env=self.environment(name),
            cwd=self._container_root(name),
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a stop reaches the JVM and its children
        )
        self.started[name] = _Started(process, log, handle)

    def _healthy(self, name: str) -> bool:
        test = [str(part) for part in self.services[name]["healthcheck"]["test"]]
        assert test[0] == "CMD", test
        checked = subprocess.run(
            [self._text(name, part) for part in test[1:]],
            env=self.environment(name),
            cwd=self._container_root(name),
            capture_output=True,
            check=False,
        )
        return checked.returncode == 0

    def _exited_zero(self, name: str) -> bool:
        code = self.started[name].process.poll()
        assert code in (None, 0), f"{name} exited {code}:\n{self.log_tail(name)}"
        return code == 0

    def wait_ready(self, name: str, condition: str, *, timeout: float) -> None:
        ready: Callable[[], bool] = {
            "service_healthy": lambda: self._healthy(name),
            "service_completed_successfully": lambda: self._exited_zero(name),
            "service_started": lambda: True,
        }[condition]

        def probe() -> bool:
            code = self.started[name].process.poll()
            if condition != "service_completed_successfully":
                assert code is None, f"{name} exited {code}:\n{self.log_tail(name)}"
            return ready()

        wait_for(probe, timeout=timeout, interval=0.5)

    def up(self, *, timeout: float = 120.0) -> None:
        """Start every service in order, each once its dependencies are ready."""
        for name in self.order():
            for dependency, rule in self.services[name].get("depends_on", {}).items():
                self.wait_ready(dependency, rule.get("condition", "service_started"), timeout=timeout)
            self.start(name)

    def assert_running(self, name: str) -> None:
        code = self.started[name].process.poll()
        assert code is None, f"{name} exited {code}:\n{self.log_tail(name)}"

    def wait_for(self, probe: Callable[[], T | None], *, timeout: float, watching: str) -> T:
        """`wait_for(probe)`, failing with the tail of the `watching` service's output on a timeout."""
        try:
            return wait_for(probe, timeout=timeout, interval=1.0)
        except AssertionError:
            raise AssertionError(
                f"nothing from {watching} in {timeout:.0f} s:\n{self.log_tail(watching)}"
            ) from None

    def log_tail(self, name: str, lines: int = 40) -> str:
        return "\n".join(self.started[name].log.read_text(errors="replace").splitlines()[-lines:])

    def down(self) -> None:
        """SIGTERM to each service still running, the last started first; SIGKILL after its grace."""
        for name in reversed(list(self.started)):
            started = self.started[name]
            if started.process.poll() is None:
                os.killpg(started.process.pid, signal.SIGTERM)
                grace = _seconds(self.services[name].get("stop_grace_period", "10s"))
                try:
                    started.process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    os.killpg(started.process.pid, signal.SIGKILL)
                    started.process.wait()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(started.process.pid, signal.SIGKILL)  # anything the service left behind
            started.handle.close()


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", str(duration))
    assert match, duration
    value, unit = float(match[1]), match[2] or "s"
    return value * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def timed_install(prefix: Path) -> float:
    """A fresh virtual environment at `prefix`, filled by scripts/install.py as the images fill theirs
    (the launcher in `prefix/launcher`); returns the seconds it took."""
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True)
    # The same install, with less CPU: Maven's JVM on the C1 compiler and the serial collector builds the
    # same launcher (55 s of user CPU for the whole install down to 45 s, load 23 to 31), and pip skips
    # its version check (a call to the index that decides nothing here).
    environment = {
        "MAVEN_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        **os.environ,
    }
    installed = subprocess.run(
        [
            str(prefix / "bin" / "python"),
            str(REPO / "scripts" / "install.py"),
            "--no-compile",
            "--launcher",
            str(prefix / "launcher"),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=environment,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return time.monotonic() - began

"""Install the project into the Python environment that runs this script: the one install path.

Used by `make setup` (`--editable --extras dev`), by each image in docker/ and by tests/docker (a fresh
virtual environment, then every compose service's command run from it). Standard library only: it runs
before anything is installed.

    python scripts/install.py [--editable] [--extras dev] [--launcher DIR] [--no-compile]

Steps, in order:
1. amazon-kclpy. Its sdist downloads the KCL jars it lists while building its wheel and fails if any is
   missing, so those jars are resolved with Maven first (which honours the machine's Maven settings and
   mirror) into a repository-layout folder that `KCL_MVN_REPO_SEARCH_URL` points the build at. The wheel
   is built once and kept in `.cache/kclpy/`; later installs take it from there (no Maven, no build).
2. The project itself, with the extras asked for: built from a scratch copy of its packages (nothing is
   written into the working tree), or `pip install -e .` with `--editable`.
3. With `--launcher DIR`: the KCL launcher (pipeline/launcher) built by Maven in a scratch folder while
   pip installs step 2 (the working tree's `target/` is never touched), and `entitlements-kcl-launcher.jar`
   with its `lib/` put in DIR. Point `ENTITLEMENTS_CONSUMER__LAUNCHER_JAR` at that jar.

Needs `mvn` (and a JDK) only while building: for step 1 when the wheel is not cached yet, for step 3.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KCLPY_VERSION = "3.1.3"
KCLPY_CACHE = ROOT / ".cache" / "kclpy"
LAUNCHER_SOURCE = ROOT / "pipeline" / "launcher"
LAUNCHER_JAR = "entitlements-kcl-launcher.jar"


def _run(*cmd: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
    subprocess.run(cmd, check=True, env=env, cwd=cwd)


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    _run(sys.executable, "-m", "pip", *args, env=env)


def _kclpy_installed() -> bool:
    probe = f"import importlib.metadata as m; assert m.version('amazon-kclpy') == '{KCLPY_VERSION}'"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False).returncode == 0


def _staged_jars(sdist: Path) -> Path:
    """The jars amazon-kclpy's pom lists, resolved by Maven into a repository-layout folder."""
    with tarfile.open(sdist) as archive:
        extracted = archive.extractfile(archive.getmember(f"amazon_kclpy-{KCLPY_VERSION}/pom.xml"))
        assert extracted is not None
        pom = extracted.read().decode()
    # The packaged pom has no coordinates of its own; Maven needs some to resolve it.
    pom = re.sub(
        r"(<modelVersion>4\.0\.0</modelVersion>)",
        r"\1<groupId>local.stage</groupId><artifactId>kclpy-jars</artifactId><version>1</version>",
        pom,
        count=1,
    )
    stage_pom = KCLPY_CACHE / "stage-pom.xml"
    stage_pom.write_text(pom)
    repository = KCLPY_CACHE / "repository"
    _run(
        "mvn",
        "-q",
        "-B",
        "-f",
        str(stage_pom),
        "dependency:copy-dependencies",
        "-Dmdep.useRepositoryLayout=true",
        f"-DoutputDirectory={repository}",
    )
    return repository


def _kclpy_wheel() -> Path:
    """amazon-kclpy's wheel, built (jars staged first) the first time, then taken from the cache."""
    wheels = KCLPY_CACHE / "wheels"
    cached = sorted(wheels.glob(f"amazon_kclpy-{KCLPY_VERSION}-*.whl"))
    if cached:
        return cached[-1]
    KCLPY_CACHE.mkdir(parents=True, exist_ok=True)
    sdist = KCLPY_CACHE / f"amazon_kclpy-{KCLPY_VERSION}.tar.gz"
    if not sdist.exists():
        _pip(
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            str(KCLPY_CACHE),
            f"amazon-kclpy=={KCLPY_VERSION}",
        )
    env = dict(os.environ, KCL_MVN_REPO_SEARCH_URL=_staged_jars(sdist).as_uri() + "/")
    # Built into a scratch folder, then moved in: a concurrent install never sees half a wheel.
    with tempfile.TemporaryDirectory(dir=KCLPY_CACHE) as scratch:
        _pip("wheel", "-q", "--no-deps", "-w", scratch, str(sdist), env=env)
        (built,) = Path(scratch).glob("amazon_kclpy-*.whl")
        wheels.mkdir(exist_ok=True)
        return built.replace(wheels / built.name)


def install_kclpy(*pip_options: str) -> None:
    if not _kclpy_installed():
        _pip("install", "-q", *pip_options, str(_kclpy_wheel()))


def _project_copy(scratch: Path) -> Path:
    """What the wheel is built from: pyproject.toml, README.md and the packages it lists, copied, so
    that a build leaves nothing in the working tree (setuptools writes `build/` beside its sources)."""
    pyproject = ROOT / "pyproject.toml"
    packages = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    copy = scratch / "project"
    copy.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, copy / name)
    skipped = shutil.ignore_patterns("__pycache__", "*.pyc", "target", "*.egg-info")
    for package in sorted({pattern.rstrip("*") for pattern in packages}):
        shutil.copytree(ROOT / package, copy / package, ignore=skipped)
    return copy


def install_project(*pip_options: str, editable: bool, extras: list[str]) -> None:
    wanted = f"[{','.join(extras)}]" if extras else ""
    if editable:
        _pip("install", "-q", *pip_options, "-e", f"{ROOT}{wanted}")
        return
    with tempfile.TemporaryDirectory() as scratch:
        _pip("install", "-q", *pip_options, f"{_project_copy(Path(scratch))}{wanted}")


def install_launcher(destination: Path) -> Path:
    """Build the KCL launcher in a scratch folder; put its jar and `lib/` in `destination`."""
    with tempfile.TemporaryDirectory() as scratch:
        build = Path(scratch) / "launcher"
        build.mkdir()
        shutil.copy2(LAUNCHER_SOURCE / "pom.xml", build / "pom.xml")
        shutil.copytree(LAUNCHER_SOURCE / "src", build / "src")
        _run("mvn", "-q", "-B", "-f", str(build / "pom.xml"), "package", "-DskipTests")
        destination.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "target" / LAUNCHER_JAR, destination / LAUNCHER_JAR)
        shutil.rmtree(destination / "lib", ignore_errors=True)
        shutil.copytree(build / "target" / "lib", destination / "lib")
    return destination / LAUNCHER_JAR


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--editable", action="store_true", help="install the project with `pip install -e`")
    parser.add_argument("--extras", action="append", default=[], help="an extra to install (repeatable)")
    parser.add_argument("--launcher", type=Path, help="also build the KCL launcher into this folder")
    parser.add_argument(
        "--no-compile", action="store_true", help="skip pip's byte-compiling (a throw-away environment)"
    )
    args = parser.parse_args(argv)
    pip_options = ["--no-compile"] if args.no_compile else []
    install_kclpy(*pip_options)  # may run Maven: before the launcher's build, never beside it
    with ThreadPoolExecutor(max_workers=1) as beside:
        # Maven builds the launcher while pip installs the project: neither waits for the other.
        launcher = None if args.launcher is None else beside.submit(install_launcher, args.launcher.resolve())
        install_project(*pip_options, editable=args.editable, extras=args.extras)
        if launcher is not None:
            sys.stdout.write(f"launcher: {launcher.result()}\n")


if __name__ == "__main__":
    main()

"""Install amazon-kclpy into the current interpreter with its jars staged through Maven.

amazon-kclpy's sdist downloads the KCL jars it lists while building and fails if any is missing.
We resolve exactly those jars with Maven (which honours the machine's Maven settings and mirror)
into a repository-layout folder and point the build at it with KCL_MVN_REPO_SEARCH_URL.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

VERSION = "3.1.3"
CACHE = Path(__file__).resolve().parent.parent / ".cache" / "kclpy"


def _installed() -> bool:
    probe = f"import importlib.metadata as m; assert m.version('amazon-kclpy') == '{VERSION}'"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False).returncode == 0


def _run(*cmd: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(cmd, check=True, env=env)


def main() -> None:
    if _installed():
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    sdist = CACHE / f"amazon_kclpy-{VERSION}.tar.gz"
    if not sdist.exists():
        _run(
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            str(CACHE),
            f"amazon-kclpy=={VERSION}",
        )
    with tarfile.open(sdist) as archive:
        member = archive.getmember(f"amazon_kclpy-{VERSION}/pom.xml")
        extracted = archive.extractfile(member)
        assert extracted is not None
        pom = extracted.read().decode()
    # The packaged pom has no coordinates of its own; Maven needs some to resolve it.
    pom = re.sub(
        r"(<modelVersion>4\.0\.0</modelVersion>)",
        r"\1<groupId>local.stage</groupId><artifactId>kclpy-jars</artifactId><version>1</version>",
        pom,
        count=1,
    )
    stage_pom = CACHE / "stage-pom.xml"
    stage_pom.write_text(pom)
    repo = CACHE / "repository"
    _run(
        "mvn",
        "-q",
        "-B",
        "-f",
        str(stage_pom),
        "dependency:copy-dependencies",
        "-Dmdep.useRepositoryLayout=true",
        f"-DoutputDirectory={repo}",
    )
    env = dict(os.environ, KCL_MVN_REPO_SEARCH_URL=repo.as_uri() + "/")
    _run(sys.executable, "-m", "pip", "install", "-q", str(sdist), env=env)


if __name__ == "__main__":
    main()

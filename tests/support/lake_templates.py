"""Lakes built once per test run and copied into each test that asks for one.

Landing a history through the lake's handler is a Delta commit per flush: the same few hundred changes
landed again for every test was the larger part of those tests' time. A template is built the first time a
test asks for it (under pytest-xdist: once per worker), then each test gets a copy of its own folder
(`shutil.copytree`), so a test that writes to its lake never changes what the next test reads. A local lake
holds no absolute path that a reader follows (the Delta log's only location is commitInfo's, informational),
so a copied lake reads as the original."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from analytics.lake import Lake, open_lake

__all__ = ["LakeTemplates"]


class LakeTemplates:
    """Named lakes under `root`, each built once by the builder given the first time it is asked for."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def copy(self, name: str, build: Callable[[Lake], None], destination: Path) -> Lake:
        """A copy of template `name` at `destination` (created, or an empty folder), built by `build` on a
        fresh lake if this run has not built it yet. One name is one history: never reuse a name for another
        builder."""
        template = self._root / name
        if not template.is_dir():
            # Built aside and renamed into place, so a builder that fails leaves no half-built template.
            staging = self._root / f"{name}.building"
            shutil.rmtree(staging, ignore_errors=True)
            build(open_lake(str(staging)))
            staging.rename(template)
        shutil.copytree(template, destination, dirs_exist_ok=True)
        return open_lake(str(destination))

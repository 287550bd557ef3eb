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
from typing import Any, TypeVar

from analytics.lake import Lake, open_lake

__all__ = ["LakeTemplates"]

T = TypeVar("T")


class LakeTemplates:
    """Named lakes under `root`, each built once by the builder given the first time it is asked for."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._built: dict[str, Any] = {}

    def copy(self, name: str, build: Callable[[Lake], T], destination: Path) -> T:
        """Copy template `name` to `destination` (created, or an empty folder), built by `build` on a fresh
        lake if this run has not built it yet, and give what `build` returned then: the same object to every
        test, so it must be one nobody changes (a frozen model, None). One name is one history: never reuse a
        name for another builder."""
        template = self._root / name
        if name not in self._built:
            # Built aside and renamed into place, so a builder that fails leaves no half-built template.
            staging = self._root / f"{name}.building"
            shutil.rmtree(staging, ignore_errors=True)
            value = build(open_lake(str(staging)))
            staging.rename(template)
            self._built[name] = value
        shutil.copytree(template, destination, dirs_exist_ok=True)
        built: T = self._built[name]
        return built

"""A package face whose names are loaded on first use: `import pipeline` (or the CLI's `--help`) stays
light, and a caller still writes `from pipeline import ShardConsumer`. Each face keeps its own table of
where its names live, beside the TYPE_CHECKING imports that give them their types."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module-level `__getattr__` of `package`: each name in `homes` imported from the module it
    names when first asked for; any other name is an AttributeError, as for a plain module."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return __getattr__

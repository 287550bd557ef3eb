"""`make bench`: run every bench/bench_*.py module's `main()` in turn."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    selected = set(sys.argv[1:])
    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if not info.name.startswith("bench_"):
            continue
        if selected and info.name.removeprefix("bench_") not in selected:
            continue
        module = importlib.import_module(f"bench.{info.name}")
        module.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`make bench`: run every bench/bench_*.py module's `main()` in turn (or the NAMEs given).

A module that fails (it exits non-zero, or raises) is named on stderr with its traceback, the modules
after it still run, and the bench ends with exit status 1: one broken figure must neither hide the
others nor let the run end as if every figure was measured."""

from __future__ import annotations

__all__ = ["main", "run_modules"]

import importlib
import pkgutil
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path


def run_modules(modules: Sequence[tuple[str, Callable[[], object]]]) -> int:
    """Run each (name, main) in order; 1 if any failed, else 0."""
    failed: list[str] = []
    for name, run in modules:
        try:
            run()
        except SystemExit as ended:
            if ended.code not in (None, 0):
                failed.append(name)
                print(f"bench {name}: exited with {ended.code!r}", file=sys.stderr)
        except Exception:  # a module's bug must not stop the modules after it
            failed.append(name)
            print(f"bench {name}: failed", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
        sys.stdout.flush()
    if failed:
        print(f"bench: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    selected = set(sys.argv[1:])
    here = Path(__file__).parent
    names = [
        info.name
        for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name)
        if info.name.startswith("bench_") and (not selected or info.name.removeprefix("bench_") in selected)
    ]
    unknown = selected - {name.removeprefix("bench_") for name in names}
    if unknown:
        print(f"bench: no such module: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2

    def runner(name: str) -> Callable[[], object]:
        # Imported when its turn comes: a module that fails to import fails alone.
        return lambda: importlib.import_module(f"bench.{name}").main()

    return run_modules([(name.removeprefix("bench_"), runner(name)) for name in names])


if __name__ == "__main__":
    raise SystemExit(main())

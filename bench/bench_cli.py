"""How long `entitlements --help` takes, beside a bare `python -c pass` measured in the same run.

Each is a fresh process (what a person typing the command waits for): the interpreter's own start is
the baseline, and the CLI's cost on top of it is what its imports add. The root group lists its
commands without importing them (entitlements/cli.py), so `--help` imports typer and rich only.
Also measured, for information: one command group's `--help` (`entitlements erasure --help`, which
imports that group's module) and `--version`.

Target: `entitlements --help` in at most 0.5 s.
"""

from __future__ import annotations

__all__ = ["main"]

import os
import subprocess
import sys

from bench._report import Figure, best_of, print_figures

REPEATS = 7
TARGET_SECONDS = 0.5


def _run(*argv: str) -> None:
    environ = {**os.environ, "COLUMNS": "100"}
    subprocess.run([sys.executable, *argv], env=environ, capture_output=True, check=True, timeout=60)


def _cli(*args: str) -> None:
    # The console script's own entry point, run by this interpreter (what `entitlements` does).
    _run("-c", "from entitlements.cli import main; main()", *args)


def main() -> None:
    baseline = best_of(REPEATS, lambda: _run("-c", "pass"))
    help_seconds = best_of(REPEATS, lambda: _cli("--help"))
    group_help = best_of(REPEATS, lambda: _cli("erasure", "--help"))
    version = best_of(REPEATS, lambda: _cli("--version"))
    print_figures(
        "CLI start-up (fresh process each, best of 7)",
        [
            Figure(
                "entitlements --help",
                help_seconds,
                "s",
                "python -c pass",
                baseline,
                better="lower",
                target=f"<= {TARGET_SECONDS} s",
                met=help_seconds <= TARGET_SECONDS,
            ),
            Figure(
                "entitlements erasure --help", group_help, "s", "python -c pass", baseline, better="lower"
            ),
            Figure("entitlements --version", version, "s", "python -c pass", baseline, better="lower"),
        ],
    )


if __name__ == "__main__":
    main()
